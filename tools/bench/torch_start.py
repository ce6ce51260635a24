#!/usr/bin/env python3
"""How long a torch job started as torchrun starts it (env://: RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT; none of crnet's variables) takes to
start, crnet against Gloo:

    PYTHONPATH=<build>/src/torch /usr/bin/python3 tools/bench/torch_start.py [-n 4] [--rounds 9]

A round starts P fresh processes (tests/torch/envrun.py's environment) for
each backend, one job after the other, which goes first alternating from
round to round. Each rank imports torch and crnet_torch (not timed), then
notes the time it calls dist.init_process_group(backend), and the time its
first dist.all_reduce of 8 bytes has returned; rank 0 is let go 0.3 s
before the others (HEAD_S: torch's TCPStore client waits a second before
it tries again to reach a rank 0 not yet listening, which would otherwise
add a second to about half the jobs of either backend). A job's start is
from the moment its last rank called init_process_group (no backend can
start before) to the moment its last rank's allreduce returned: torch's store
(the env:// TCPStore, its barrier), the backend's own start (crnet: the
store as directory, the rendezvous, the mesh and its handshakes; Gloo: its
pairs' connections) and the first call; and the backend's part alone,
from the moment the last rank had torch's store. Printed: every round,
then the median of each backend, its range, and the ratio crnet / Gloo
(the target of issue 37: at most 1.2).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "torch"))
import envrun  # noqa: E402


# How long rank 0 starts before the others (job()).
HEAD_S = 0.3


def rank(backend, sync):
    import importlib
    import torch
    import torch.distributed as dist
    import crnet_torch  # noqa: F401  (registers "crnet")
    torch.set_num_threads(1)
    # When env:// has made torch's store (its TCPStore, every rank
    # connected): the backend's own start begins there.
    rdv = importlib.import_module("torch.distributed.rendezvous")
    env_handler = rdv._rendezvous_handlers["env"]
    stored = []

    def timed(*args, **kwargs):
        for got in env_handler(*args, **kwargs):
            stored.append(time.time())
            yield got

    rdv._rendezvous_handlers["env"] = timed
    # Every rank imported: all start together (rank 0 a little earlier:
    # job()).
    r = os.environ["RANK"]
    open(os.path.join(sync, "ready." + r), "w").close()
    while not os.path.exists(os.path.join(sync, "go0" if r == "0" else "go")):
        time.sleep(0.0005)
    t0 = time.time()
    dist.init_process_group(backend)
    t = torch.ones(2, dtype=torch.float32)
    dist.all_reduce(t)
    t1 = time.time()
    ok = t[0].item() == dist.get_world_size()
    print("TIMES " + json.dumps([t0, stored[0], t1, ok]), flush=True)
    dist.destroy_process_group()


def job(backend, p, timeout):
    """(start, backend's part) of one job, in seconds."""
    with tempfile.TemporaryDirectory() as sync:
        procs = envrun.start(p, [sys.executable, os.path.abspath(__file__),
                                 "--rank", backend, sync],
                             extra={"OMP_NUM_THREADS": "1"}, capture=True)
        until = time.monotonic() + timeout
        while (len(os.listdir(sync)) < p and time.monotonic() < until
               and all(pr.poll() is None for pr in procs)):
            time.sleep(0.001)
        # Rank 0 first, the others HEAD_S later: torch's TCPStore client
        # retries a refused connection only after a second, so a rank that
        # came before rank 0 listened would add that second to either
        # backend's start at random (about half the jobs when all go at
        # once).
        open(os.path.join(sync, "go0"), "w").close()
        time.sleep(HEAD_S)
        open(os.path.join(sync, "go"), "w").close()
        codes, outs, _ = envrun.finish(procs, timeout)
    times = []
    for r, (code, text) in enumerate(zip(codes, outs)):
        got = [json.loads(line[6:]) for line in text.splitlines()
               if line.startswith("TIMES ")]
        if code != 0 or not got or not got[0][3]:
            raise SystemExit(f"torch_start: {backend} rank {r} exited {code}:"
                             f"\n{text}")
        times.append(got[0])
    end = max(t[2] for t in times)
    return end - max(t[0] for t in times), end - max(t[1] for t in times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=4, help="ranks (default 4)")
    ap.add_argument("--rounds", type=int, default=9,
                    help="jobs of each backend (default 9)")
    ap.add_argument("--timeout", type=float, default=120,
                    help="seconds a job may take")
    a = ap.parse_args()
    got = {"crnet": [], "gloo": []}
    for k in range(a.rounds):
        order = ["crnet", "gloo"] if k % 2 == 0 else ["gloo", "crnet"]
        for backend in order:
            got[backend].append(job(backend, a.n, a.timeout))
        print("round %d: start crnet %.1f ms, gloo %.1f ms; after the store "
              "crnet %.1f ms, gloo %.1f ms" % (
                  k + 1, got["crnet"][-1][0] * 1e3, got["gloo"][-1][0] * 1e3,
                  got["crnet"][-1][1] * 1e3, got["gloo"][-1][1] * 1e3),
              flush=True)
    for part, what in ((0, "start to the first allreduce"),
                       (1, "from torch's store to the first allreduce")):
        med = {}
        for b in ("crnet", "gloo"):
            v = [x[part] * 1e3 for x in got[b]]
            med[b] = statistics.median(v)
            print(f"{what}: {b} median {med[b]:.1f} ms (range "
                  f"{min(v):.1f}-{max(v):.1f}) over {a.rounds} jobs of "
                  f"p = {a.n}")
        print(f"{what}: ratio crnet / gloo {med['crnet'] / med['gloo']:.2f}"
              + (" (target <= 1.2)" if part == 0 else ""))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--rank":
        rank(sys.argv[2], sys.argv[3])
    else:
        main()
