"""The crnet backend in a job that torch's launchers started (env://: RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT; none of crnet's variables): the
default group joins the crnet job through torch's store.

Checks: torch's rank and size are the group's; rank 0 published crnet's
rendezvous (and, without CRNET_JOB_KEY_FILE, the key) under crnet_torch/
in the store torch handed the backend, and nothing at the store's top
level; allreduce, broadcast from every root, all_gather, reduce_scatter,
against references every rank computes; new_group (the ends, the evens,
calls on both in flight) and non-members; a Gloo group over the same
store gives the same sums.

    tests/torch/envrun.py -n 3 /usr/bin/python3 tests/torch/test_env.py [--gloo-default]

With --gloo-default the default group is Gloo's and the job is joined
through its store by the first new_group(backend="crnet"), on which the
collectives then run.

With TEST_KEY_OUT set, rank 0 writes the key it finds in the store there
(test_env_failures.py checks that no rank ever prints it).
"""
import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchtest import Checks, data, torch, dist  # noqa: E402

from torch.distributed import distributed_c10d as c10d  # noqa: E402


def has(store, key):
    """Whether torch's store holds `key` (torch 1.13's Python Store has no
    check(); what rank 0 published is there long before anyone asks)."""
    try:
        store.wait([key], datetime.timedelta(milliseconds=200))
        return True
    except RuntimeError:
        return False


def published(c, r, prefix):
    """What rank 0 left in torch's store for the others, under `prefix` of
    the default group's store."""
    store = c10d._get_default_store()
    key_file = "CRNET_JOB_KEY_FILE" in os.environ
    c.ok(has(store, prefix + "crnet.rendezvous"),
         f"no {prefix}crnet.rendezvous in torch's store")
    c.ok(has(store, prefix + "crnet.key") != key_file,
         "the key is published unless CRNET_JOB_KEY_FILE gives it"
         if not key_file else "the key was published with CRNET_JOB_KEY_FILE")
    # Not beside torch's own keys.
    c.ok(not has(store, "crnet.key") and (
        prefix == "crnet_torch/" or not has(store, "crnet_torch/crnet.key")),
        "crnet's keys outside their prefix")
    if r == 0 and os.environ.get("TEST_KEY_OUT") and not key_file:
        with open(os.environ["TEST_KEY_OUT"], "wb") as f:
            f.write(store.get(prefix + "crnet.key"))


def collectives(c, r, p, g=None):
    ref = sum(data(k, 1, 1031, torch.float32) for k in range(p))
    t = data(r, 1, 1031, torch.float32)
    dist.all_reduce(t, group=g)
    c.equal(t, ref, "all_reduce")
    for root in range(p):
        t = data(r, 2, 17, torch.int64)
        dist.broadcast(t, src=root, group=g)
        c.equal(t, data(root, 2, 17, torch.int64), f"broadcast from {root}")
    out = [torch.empty(5, dtype=torch.float64) for _ in range(p)]
    dist.all_gather(out, data(r, 3, 5, torch.float64), group=g)
    for k in range(p):
        c.equal(out[k], data(k, 3, 5, torch.float64), f"all_gather block {k}")
    out = torch.empty(7, dtype=torch.int32)
    dist.reduce_scatter(out, [data(r, 4 + j, 7, torch.int32) for j in range(p)],
                        group=g)
    c.equal(out, sum(data(k, 4 + r, 7, torch.int32) for k in range(p)),
            "reduce_scatter")


def groups(c, r, p):
    ends = sorted({0, p - 1})
    evens = list(range(0, p, 2))
    g_ends = dist.new_group([p - 1, 0])
    g_even = dist.new_group(evens)
    g_gloo = dist.new_group(backend="gloo",
                            timeout=datetime.timedelta(seconds=60))
    works = []
    for g, members in [(g_ends, ends), (g_even, evens)]:
        want = members.index(r) if r in members else -1
        c.ok(dist.get_rank(g) == want,
             f"rank in group {members}: {dist.get_rank(g)}, want {want}")
        if r in members:
            c.ok(dist.get_backend(g) == "crnet", f"group {members} is crnet's")
            t = torch.full((100,), float(r + 1), dtype=torch.float64)
            works.append((t, dist.all_reduce(t, group=g, async_op=True),
                          float(sum(k + 1 for k in members)), members))
    for t, w, want, members in reversed(works):
        w.wait()
        c.ok(bool((t == want).all()), f"all_reduce on group {members}")
    t1 = data(r, 9, 4096, torch.float32)
    t2 = t1.clone()
    dist.all_reduce(t1)
    dist.all_reduce(t2, group=g_gloo)
    c.ok(torch.equal(t1, t2), "crnet and gloo agree (small integers)")
    dist.destroy_process_group(g_even)
    dist.barrier()


def main():
    if any(k in os.environ for k in ("CRNET_RANK", "CRNET_RENDEZVOUS")):
        print("test_env: run it with tests/torch/envrun.py, not crlaunch",
              flush=True)
        sys.exit(2)
    gloo_default = "--gloo-default" in sys.argv[1:]
    dist.init_process_group("gloo" if gloo_default else "crnet",
                            timeout=datetime.timedelta(seconds=60))
    c = Checks("test_env")
    r, p = dist.get_rank(), dist.get_world_size()
    c.ok(r == int(os.environ["RANK"]) and p == int(os.environ["WORLD_SIZE"]),
         f"rank {r} of {p}, env:// says {os.environ['RANK']} of "
         f"{os.environ['WORLD_SIZE']}")
    if gloo_default:
        g = dist.new_group(backend="crnet")
        c.ok(dist.get_backend(g) == "crnet" and dist.get_rank(g) == r,
             "a crnet group beside Gloo's default group")
        published(c, r, "crnet_torch/")
        collectives(c, r, p, g)
        t1 = data(r, 9, 4096, torch.float32)
        t2 = t1.clone()
        dist.all_reduce(t1, group=g)
        dist.all_reduce(t2)
        c.ok(torch.equal(t1, t2), "crnet and gloo agree (small integers)")
    else:
        c.ok(dist.get_backend() == "crnet", "the default group is crnet's")
        published(c, r,
                  c10d._pg_names[c10d.GroupMember.WORLD] + "/crnet_torch/")
        collectives(c, r, p)
        groups(c, r, p)
    c.finish()


if __name__ == "__main__":
    main()
