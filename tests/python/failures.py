"""One rank of a job that goes wrong on purpose, or that ends untidily.

    crlaunch -n P python3 tests/python/failures.py CASE OUTDIR

run_job.py runs it and judges the outcome: each rank writes what it saw to
OUTDIR/rank<r>.json (the moment it saw it, the exception's class, code and
message), and, for the exit cases, again from a hook that runs after
crnet's own exit hook. Standard library only (array.array buffers), so
these jobs need no NumPy.
"""

import array
import atexit
import gc
import json
import os
import signal
import sys
import time
import weakref

CASE, OUT = sys.argv[1], sys.argv[2]
RANK = int(os.environ.get("CRNET_RANK", "0"))
SEEN = {}
# A process crlaunch --restart started again records apart from the one
# it replaces.
NAME = "restart.json" if os.environ.get("CRNET_RESTARTED") else "rank%d.json" % RANK


def write(name=NAME, **fields):
    SEEN.update(fields)
    tmp = os.path.join(OUT, name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(SEEN, f)
    os.replace(tmp, os.path.join(OUT, name))


# Registered before crnet is imported, so that it runs after crnet's exit
# hook (atexit runs last-registered first): it sees what that hook did.
AFTER_EXIT = []
atexit.register(lambda: [f() for f in AFTER_EXIT])

import crnet  # noqa: E402


def error_fields(e):
    return {
        "when": time.time(),
        "class": type(e).__name__,
        "code": getattr(e, "code", None),
        "errmsg": getattr(e, "errmsg", str(e)),
        "abort_code": getattr(e, "abort_code", None),
    }


def signal_file(name):
    """Tells the other ranks of the job something: a file in OUT."""
    with open(os.path.join(OUT, name), "w"):
        pass


def await_files(names, seconds=30):
    """Waits until every named file is in OUT (the other ranks' signals),
    or exits the rank saying which never came."""
    until = time.monotonic() + seconds
    while True:
        missing = [n for n in names if not os.path.exists(os.path.join(OUT, n))]
        if not missing:
            return
        if time.monotonic() > until:
            raise SystemExit("rank %d: no %s within %d s" % (RANK, missing, seconds))
        time.sleep(0.001)


def until_error(comm, n=1 << 16):
    """Allreduces until one raises; returns the exception. The first is
    started nonblocking and the file inflight<rank> written once it is in
    flight: a rank that fails the job on purpose waits for those of the
    others, so that their calls are in flight when it does."""
    x = array.array("f", [1.0]) * n
    t0 = time.time()
    req = comm.iallreduce(x)
    signal_file("inflight%d" % RANK)
    try:
        req.wait()
    except crnet.Error as e:
        return e
    while True:
        try:
            comm.allreduce(x)
        except crnet.Error as e:
            return e
        if time.time() - t0 > 30:
            raise SystemExit("rank %d: no error within 30 s" % RANK)


def others_in_flight(comm):
    await_files(["inflight%d" % r for r in range(comm.size) if r != comm.rank])


def peer_lost(comm):
    victim = comm.size - 1
    comm.barrier()
    if comm.rank == victim:
        others_in_flight(comm)  # they cannot complete without this rank
        write(killed=time.time())
        os.kill(os.getpid(), signal.SIGKILL)
    e = until_error(comm)
    write(**error_fields(e))
    # Sticky: the next call raises the same at once.
    t0 = time.time()
    try:
        comm.barrier()
        write(sticky="no error")
    except crnet.Error as e2:
        write(sticky=type(e2).__name__, sticky_seconds=time.time() - t0)


def abort(comm):
    comm.barrier()
    if comm.rank == 1:
        others_in_flight(comm)
        write(aborting=time.time())
        comm.abort(7)
        return
    e = until_error(comm)
    write(**error_fields(e))


def mismatch(comm):
    comm.barrier()
    n = 4 if comm.rank == 0 else 5
    try:
        comm.allreduce(array.array("d", [1.0]) * n)
        write(outcome="no error")
    except crnet.Error as e:
        write(**error_fields(e))


def timeout(comm):
    comm.barrier()
    if comm.rank == 0:
        # Late: only once every other rank has timed out.
        await_files(["timedout%d" % r for r in range(1, comm.size)])
    t0 = time.time()
    try:
        comm.allreduce(array.array("i", [1]))
        write(outcome="no error")
    except crnet.Error as e:
        write(seconds=time.time() - t0, **error_fields(e))
        signal_file("timedout%d" % RANK)
        return
    # The late rank may complete the call (the others' data had left before
    # they timed out); their failure reaches it at its next call.
    try:
        comm.barrier()
        write(next_call="no error")
    except crnet.Error as e:
        write(**error_fields(e))


def exit_open(comm):
    # Comms left open at exit, in every relation: the exit hook closes the
    # derived ones, then the world.
    sub = comm.split(comm.rank % 2)
    d = comm.dup()
    dd = sub.dup()
    for c in (comm, sub, d, dd):
        x = array.array("i", [1])
        c.allreduce(x)
        assert x[0] == c.size, (x[0], c.size)
    keep = [comm, sub, d, dd]

    def after():
        write(closed=[c.closed for c in keep])

    AFTER_EXIT.append(after)
    write(done=time.time())


def exit_inflight(comm):
    # Calls in flight at exit, kept and dropped: the exit hook completes
    # them (every rank started the same ones) before it closes the comm.
    p = comm.size
    xs = [array.array("d", [float(comm.rank + k)]) * 1000 for k in range(3)]
    reqs = [comm.iallreduce(x) for x in xs]
    dropped = array.array("q", [comm.rank]) * 10
    comm.iallreduce(dropped)
    d = comm.dup()
    d.ibarrier()

    def after():
        want = [sum(range(p)) + p * k for k in range(3)]
        write(done=[r.done for r in reqs],
              ok=[x[0] == w and x[999] == w for x, w in zip(xs, want)],
              dropped_ok=dropped[9] == sum(range(p)),
              closed=[comm.closed, d.closed])

    AFTER_EXIT.append(after)
    write(started=time.time())


def exit_stuck(comm):
    # A receive whose message never comes: the exit hook gives up after
    # crnet.exit_grace seconds and aborts the job rather than hang. Every
    # rank waits for the next one, so none leaves first (a rank that left
    # in order would fail the receives awaiting it at once).
    crnet.exit_grace = 1.0
    comm.barrier()
    global STUCK
    STUCK = comm.irecv(bytearray(4), source=(comm.rank + 1) % comm.size,
                       tag=99)
    write(exiting=time.time())


def gc_order(_):
    # The program drops the world comm before a comm split from it: the
    # split keeps the world alive, and the world is destroyed after it.
    # (The world is made here: a caller's reference would keep it.)
    comm = crnet.Comm()
    sub = comm.split(0, key=-comm.rank)
    ref = weakref.ref(comm)
    del comm
    gc.collect()
    alive_after_del = ref() is not None
    x = array.array("i", [sub.rank])
    sub.allreduce(x)
    ok = x[0] == sum(range(sub.size))
    del sub
    gc.collect()
    write(alive_after_del=alive_after_del, ok=ok, gone=ref() is None)


def survive(comm):
    """crlaunch --keep-going: the last rank kills itself while the others'
    allreduces are in flight; the survivors revoke, agree, shrink and go on
    (crnet.h, CRNET_ON_FAILURE=continue)."""
    victim = comm.size - 1
    comm.barrier()
    if comm.rank == victim:
        others_in_flight(comm)
        write(killed=time.time())
        os.kill(os.getpid(), signal.SIGKILL)
    e = until_error(comm)
    write(first=type(e).__name__, first_errmsg=str(e))
    comm.revoke()
    write(revoked=comm.revoked)
    try:
        comm.barrier()
        write(after_revoke="no error")
    except crnet.Error as e2:
        write(after_revoke=type(e2).__name__)
    try:
        comm.agree(True)
        write(agree_unacked="no error")
    except crnet.PeerLost as e3:
        write(agree_unacked="PeerLost", agree_unacked_flag=e3.flag)
    write(lost=comm.lost(), acked=comm.ack_lost())
    write(agreed=comm.agree(comm.rank != 0))
    shrunk = comm.shrink()
    x = array.array("q", [comm.rank])
    shrunk.allreduce(x)
    write(shrunk=[shrunk.rank, shrunk.size], shrunk_sum=x[0])
    shrunk.close()


def grow(comm):
    """crlaunch --restart 1: the last rank kills itself; crlaunch starts it
    again, and its crnet.Comm() returns once the survivors' grow admitted
    it. The survivors grow until the comm is whole again (a few ms apart,
    a bounded number of times; every survivor sees the same sizes)."""
    victim = comm.size - 1
    if comm.joined:
        x = array.array("q", [comm.rank])
        comm.allreduce(x)
        write(joined=True, grown=[comm.rank, comm.size],
              job_rank=comm.job_rank(comm.rank), grown_sum=x[0])
        comm.close()
        return
    write(joined=comm.joined)
    comm.barrier()
    if comm.rank == victim:
        others_in_flight(comm)
        write(killed=time.time())
        os.kill(os.getpid(), signal.SIGKILL)
    until_error(comm)
    comm.revoke()
    comm.ack_lost()
    grown, tries = comm.grow(), 0
    while grown.size < comm.size and tries < 500:
        time.sleep(0.01)
        smaller, grown = grown, grown.grow()
        smaller.close()
        tries += 1
    x = array.array("q", [grown.rank])
    grown.allreduce(x)
    write(grown=[grown.rank, grown.size], grown_sum=x[0], tries=tries)
    grown.close()


CASES = {
    "survive": survive,
    "grow": grow,
    "peer-lost": peer_lost,
    "abort": abort,
    "mismatch": mismatch,
    "timeout": timeout,
    "exit-open": exit_open,
    "exit-inflight": exit_inflight,
    "exit-stuck": exit_stuck,
    "gc-order": gc_order,
}


def main():
    write(started=time.time())
    if CASE == "gc-order":
        gc_order(None)
        return
    CASES[CASE](crnet.Comm(timeout=1.0) if CASE == "timeout" else crnet.Comm())


if __name__ == "__main__":
    main()
