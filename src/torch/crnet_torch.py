"""crnet as a torch.distributed backend (torch 1.13; docs/TORCH.md).

    import crnet_torch                  # registers the backend "crnet"
    import torch.distributed as dist
    dist.init_process_group("crnet")    # under crlaunch: nothing else to say

and run the program with ``crlaunch -n 4 python3 train.py``. Ranks, size
and rendezvous come from crnet's environment (CRNET_RANK, CRNET_SIZE,
CRNET_RENDEZVOUS, ...), which crlaunch sets. Without it (torchrun, a
Kubernetes PyTorchJob, any env:// start: RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) the default group joins the crnet job through the store torch
hands the backend, with torch's rank and size (or, under another backend's
default group, the first crnet new_group through the default store): rank
0 publishes crnet's rendezvous and a fresh job key there (docs/STARTING.md
says who can read them).

Importing this module does four things, and no network I/O:

1. registers the backend "crnet" (``Backend.register_backend``); its
   process groups are ``_crnet_torch``'s ProcessGroupCrnet, one crnet comm
   each;
2. registers the rendezvous "crnet://" and makes "env://" (torch's
   default init_method) fall back to it when MASTER_ADDR/MASTER_PORT are
   not set but crnet's environment is: rank 0 serves a TCPStore on a free
   port and tells the others where over crnet itself. torch needs that
   store for its own bookkeeping (the barriers of init_process_group and
   new_group); the crnet backend does not use it. Gloo and other backends
   get the same store, so ``--backend gloo`` also just works under
   crlaunch;
3. wraps torch's ``_new_process_group_helper`` so that ``new_group`` makes
   a crnet sub-communicator (crnet_comm_split) on every rank of the job:
   torch calls a backend's creator only on the members of the new group,
   but a split is collective over its parent, and the other ranks must
   take part with CRNET_UNDEFINED;
4. at exit, waits for calls in flight (10 s at most, then aborts the job),
   closes every crnet group and leaves the job in order, waiting for the
   other ranks to leave too; after an uncaught exception it aborts the job
   instead, so that the other ranks fail at once rather than wait.
"""
import atexit
import datetime
import importlib
import inspect
import os
import socket
import sys
from urllib.parse import parse_qs, urlparse

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as _c10d

import _crnet_torch as _C

# The module (torch.distributed.rendezvous is also a function's name).
_rendezvous = importlib.import_module("torch.distributed.rendezvous")

__all__ = ["BACKEND", "shutdown", "in_flight", "agree", "shrink_default_group",
           "grow_default_group", "join_default_group", "restarted"]

BACKEND = "crnet"

# What torch gives a group when the caller names no timeout.
_DEFAULT_TIMEOUT = getattr(_c10d, "default_pg_timeout",
                           datetime.timedelta(minutes=30))

# At exit, calls still in flight get this long before the job is aborted.
_EXIT_GRACE_S = 10.0


def _seconds(timeout):
    if timeout is None:
        timeout = _DEFAULT_TIMEOUT
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def in_flight(pg):
    """Calls started on the crnet process group `pg` and not complete."""
    return _C.in_flight(pg)


def shutdown(grace=_EXIT_GRACE_S, abort=False):
    """Closes every crnet process group (waiting up to `grace` seconds for
    calls in flight, then aborting the job) and leaves the crnet job, which
    waits for the other ranks to leave too; with abort=True it aborts the
    job instead (every rank's calls fail at once with CRNET_EABORTED, and
    crlaunch exits 1). Runs at exit by itself, aborting if the program ends
    with an uncaught exception; afterwards crnet groups raise
    RuntimeError."""
    _C.shutdown(grace, 1 if abort else 0)


# An uncaught exception ends this rank while the others may be waiting for
# it in a collective: at exit, abort the job rather than wait for them to
# leave (they would not until their own timeout).
_uncaught = False
_previous_excepthook = sys.excepthook


def _excepthook(kind, value, tb):
    global _uncaught
    _uncaught = True
    _previous_excepthook(kind, value, tb)


sys.excepthook = _excepthook
atexit.register(lambda: shutdown(abort=_uncaught))


# --- 1. the backend ----------------------------------------------------------

# The sub-communicator the new_group wrapper made for the group torch is
# about to create (one at a time: new_group runs on the program's thread,
# in the same order on every rank).
_pending_sub = None


def _create_process_group(store, rank, size, timeout):
    global _pending_sub
    sub, _pending_sub = _pending_sub, None
    if sub is None and _c10d.GroupMember.WORLD is not None:
        raise RuntimeError(
            "crnet: a crnet sub-group must be made by torch.distributed."
            "new_group on every rank, with crnet_torch imported before; "
            "this torch (%s) made it another way" % torch.__version__)
    if sub is None:
        name = "the default group"
    elif _c10d.GroupMember.WORLD is None:
        name = "the default group of the survivors (%d rank(s))" % size
    else:
        name = "a new_group of %d rank(s)" % size
    # Started without crnet's environment (torch's launchers): the default
    # group joins the job through torch's store. new_group's are splits of
    # the joined job and need no store.
    through_store = sub is None and not _under_crnet()
    return _C.create_process_group(store, rank, size, _seconds(timeout), sub,
                                   name, through_store)


if BACKEND.upper() not in getattr(dist.Backend, "_plugins", {}):
    dist.Backend.register_backend(BACKEND, _create_process_group)


# --- surviving lost ranks (crlaunch --keep-going; docs/TORCH.md) -------------

def agree(ok, group=None):
    """True on every survivor of `group` (the default group) when every
    survivor passes a true `ok` and no rank was lost since the last
    agreement, False on every survivor otherwise: crnet_comm_agree, a
    fault-tolerant agreement that holds even when ranks die during it.
    Training calls it after each step's backward pass, and takes the
    optimizer step only on True; on False, shrink_default_group() and
    redo the step."""
    pg = group if group is not None else _c10d._get_default_group()
    flag, lost = _C.agree(pg, 1 if ok else 0)
    return bool(flag) and not lost


def shrink_default_group(timeout=None):
    """Replaces the default process group by one of its survivors, in their
    order (crnet_comm_shrink): the process keeps running, torch's rank and
    world size become the new group's, and what was made over the old group
    (a DistributedDataParallel model) must be made again. A TCPStore for
    torch's own bookkeeping is served by the new rank 0, its address sent
    over the new comm. Collective over the survivors; returns (rank, size).
    Needs CRNET_ON_FAILURE=continue (crlaunch --keep-going)."""
    pg = _c10d._get_default_group()
    return _new_default_group(_C.shrink(pg), timeout, True)


def restarted():
    """True in a process crlaunch --restart started again in place of a
    lost rank: it calls join_default_group() instead of init_process_group
    and takes its state from the survivors."""
    return int(os.environ.get("CRNET_RESTARTED", "0") or "0") > 0


def grow_default_group(size=None, timeout=None, wait=0.01):
    """The survivors' side of growing back (crlaunch --restart N): replaces
    the default group by one of its survivors and, after them, the
    restarted ranks waiting to join (crnet_comm_grow), growing again
    `wait` seconds apart until the group has `size` ranks (default: the
    job's) or `timeout` (default 60 s) has passed (counted in tries, so
    that every survivor stops alike). As shrink_default_group, torch's rank
    and size become the new group's and DDP must be made again. The
    restarted ranks are in their join_default_group() meanwhile. Returns
    (rank, size, admitted): how many ranks came in, who then need the
    survivors' state (a broadcast from rank 0 on the new group)."""
    pg = _c10d._get_default_group()
    if size is None:
        size = int(os.environ.get("CRNET_SIZE", "0") or "0") or \
            _C.world(_seconds(_DEFAULT_TIMEOUT))[1]
    limit = 60.0 if timeout is None else _seconds(timeout)
    sub, admitted = _C.grow(pg, size, max(0, int(limit / wait)), wait)
    rank, size = _new_default_group(sub, timeout, True)
    return rank, size, admitted


def join_default_group(timeout=None):
    """A restarted rank's init_process_group: joins the running job (its
    crnet_comm_init returns once the survivors' grow_default_group admitted
    it; CRNET_INIT_TIMEOUT bounds the wait) and makes the default group
    with them. Returns (rank, size): the restarted ranks come after the
    survivors."""
    return _new_default_group(_C.join(_seconds(timeout)), timeout, False)


def _new_default_group(sub, timeout, replace):
    """The default group over `sub` (a SubComm every member made alike),
    with a TCPStore served by its rank 0 for torch's bookkeeping."""
    global _pending_sub
    rank, size = sub.rank, sub.size
    if timeout is None:
        timeout = _DEFAULT_TIMEOUT
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    if rank == 0:
        host = _store_host()
        store = dist.TCPStore(host, 0, size, True, timeout,
                              wait_for_workers=False)
        _C.bcast_bytes_sub(sub, ("%s %d" % (host, store.port)).encode())
    else:
        host, port = _C.bcast_bytes_sub(sub, None).decode().split()
        store = dist.TCPStore(host, int(port), size, False, timeout)
    if replace:
        dist.destroy_process_group()
    _pending_sub = sub
    try:
        dist.init_process_group(BACKEND, store=store, rank=rank,
                                world_size=size, timeout=timeout)
    finally:
        _pending_sub = None
    return rank, size


# --- 2. the rendezvous: a TCPStore whose address travels over crnet -----------

def _under_crnet():
    """Whether crnet's environment names this process's job (crlaunch sets
    all of these; a scheduler may set CRNET_RENDEZVOUS and let crnet take
    the rank from SLURM_PROCID, SLURM_NTASKS)."""
    return "CRNET_RENDEZVOUS" in os.environ or (
        "CRNET_RANK" in os.environ and "CRNET_SIZE" in os.environ)


def _store_host():
    """The address of rank 0 the other ranks can reach: MASTER_ADDR if set,
    else the one this host uses towards crnet's rendezvous (which every rank
    reached already), else the host name."""
    if os.environ.get("MASTER_ADDR"):
        return os.environ["MASTER_ADDR"]
    rv = os.environ.get("CRNET_RENDEZVOUS", "")
    host, _, port = rv.rpartition(":")
    host = host.strip("[]")
    if host:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect((host, int(port or 9)))
                return s.getsockname()[0]
        except (OSError, ValueError):
            pass
    return socket.gethostname()


def _crnet_rendezvous(url, timeout=_DEFAULT_TIMEOUT, **kwargs):
    query = parse_qs(urlparse(url).query)
    rank = int(query.get("rank", ["-1"])[0])
    size = int(query.get("world_size", ["-1"])[0])
    crank, csize = _C.world(_seconds(timeout))
    if rank not in (-1, crank) or size not in (-1, csize):
        raise RuntimeError(
            "crnet rendezvous: rank %d of %d asked for, but crnet's "
            "environment says rank %d of %d (CRNET_RANK, CRNET_SIZE)"
            % (rank, size, crank, csize))
    if crank == 0:
        host = _store_host()
        store = dist.TCPStore(host, 0, csize, True, timeout,
                              wait_for_workers=False)
        _C.bcast_bytes(("%s %d" % (host, store.port)).encode(),
                       _seconds(timeout))
    else:
        host, port = _C.bcast_bytes(None, _seconds(timeout)).decode().split()
        store = dist.TCPStore(host, int(port), csize, False, timeout)
    yield (store, crank, csize)
    raise RuntimeError("crnet rendezvous: cannot rendezvous again")


_env_handler = _rendezvous._rendezvous_handlers.get("env")


def _env_or_crnet(url, **kwargs):
    """torch's env://, or crnet:// when MASTER_ADDR/MASTER_PORT are not set
    and the process runs under crlaunch (or any launcher that sets crnet's
    environment)."""
    if _under_crnet() and not (os.environ.get("MASTER_ADDR")
                               and os.environ.get("MASTER_PORT")):
        return _crnet_rendezvous(url, **kwargs)
    return _env_handler(url, **kwargs)


if "crnet" not in _rendezvous._rendezvous_handlers:
    _rendezvous.register_rendezvous_handler("crnet", _crnet_rendezvous)
    if _env_handler is not None:
        _rendezvous._rendezvous_handlers["env"] = _env_or_crnet


# --- 3. new_group: a split in which every rank of the job takes part ---------

_helper = getattr(_c10d, "_new_process_group_helper", None)


def _is_crnet(backend):
    return str(backend).upper() == BACKEND.upper()


def _new_process_group_helper(*args, **kwargs):
    global _pending_sub
    bound = _helper_signature.bind(*args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    ranks = list(a["global_ranks_in_group"] or [])
    if not _is_crnet(a["backend"]) or not ranks:
        # Another backend, or the default group (created on every rank).
        return _helper(*args, **kwargs)
    timeout = _seconds(a.get("timeout"))
    default = _c10d.GroupMember.WORLD
    if default is not None and not _under_crnet():
        # Another backend's default group, started by torch's launchers:
        # the job is joined through its store, on the first crnet group.
        crank, csize = _C.world_through_store(
            _c10d._get_default_store(), default.rank(), default.size(),
            timeout)
    else:
        crank, csize = _C.world(timeout)
    if default is not None and (default.rank() != crank
                                or default.size() != csize):
        raise RuntimeError(
            "crnet: new_group: the default group's rank %d of %d is not "
            "crnet's %d of %d, so torch's group ranks cannot be crnet's"
            % (default.rank(), default.size(), crank, csize))
    if crank in ranks:
        # torch numbers a group's ranks by their place in the list.
        sub = _C.split(0, ranks.index(crank), timeout)
    else:
        sub = _C.split(_C.UNDEFINED, 0, timeout)
    if sub is None:
        return _helper(*args, **kwargs)   # NON_GROUP_MEMBER
    _pending_sub = sub
    try:
        return _helper(*args, **kwargs)
    finally:
        _pending_sub = None


if _helper is not None and not getattr(_helper, "_crnet_wrapped", False):
    _helper_signature = inspect.signature(_helper)
    _new_process_group_helper._crnet_wrapped = True
    _c10d._new_process_group_helper = _new_process_group_helper
