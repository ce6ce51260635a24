"""python_overhead.py: what the Python module adds to a crnet call.

    python3 tools/bench/python_overhead.py [--build DIR] [--p 1,2]
                                           [--iters N] [--runs R]

For each p, in the same run and the same way, the median time of an 8-byte
float32 allreduce (2 elements, sum):

  C       crbench -b 8 -e 8 -n N: N repetitions of [barrier; time one
          crnet_allreduce], each repetition's time the slowest rank's,
          the median over repetitions (docs/PERFORMANCE.md);
  Python  the same method through the module: [comm.barrier(); time one
          comm.allreduce(a)] N times, the slowest rank's time per
          repetition (one allreduce of the times at the end), the median;
  loop    N back-to-back comm.allreduce(a) calls timed as a whole, in
          batches of 100, the median batch's time per call (no barrier
          between calls; the figure a training loop sees).
  nb      the same with comm.iallreduce(a).wait(): a call started, then
          waited for (with CRNET_PROGRESS_THREAD=1 in the environment,
          the hand-over between the caller and crnet's progress thread,
          as torch's Work.wait() has it).

The overhead is Python minus C. At p = 1 a call moves no data (a copy of
8 bytes), so its C figure is the library's own cost of a call and the
difference is the module's alone: argument parsing, the buffer export and
release, the release and re-acquisition of the GIL, the result. At p = 2
the figure includes a round trip between two processes, and the difference
between two noisy medians is noisier than at p = 1. The script repeats the
pair R times (default 3), interleaved, and reports each run and the median
over runs.

The ranks run the interpreter that runs this script, with
PYTHONPATH=DIR/src/python (DIR default: build).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)


def rank_main(iters):
    """One rank of the Python measurement; rank 0 prints JSON."""
    import array

    import crnet

    comm = crnet.Comm()
    a = array.array("f", [1.0, 2.0])
    for _ in range(200):
        comm.allreduce(a)
    # crbench's method: barrier, then one timed call.
    times = array.array("d", [0.0]) * iters
    clock = time.perf_counter
    for i in range(iters):
        comm.barrier()
        t0 = clock()
        comm.allreduce(a)
        times[i] = clock() - t0
    comm.allreduce(times, "max")
    # Back to back, in batches of 100.
    batches = []
    for _ in range(max(iters // 100, 5)):
        comm.barrier()
        t0 = clock()
        for _ in range(100):
            comm.allreduce(a)
        batches.append((clock() - t0) / 100)
    b = array.array("d", batches)
    comm.allreduce(b, "max")
    batches = []
    for _ in range(max(iters // 100, 5)):
        comm.barrier()
        t0 = clock()
        for _ in range(100):
            comm.iallreduce(a).wait()
        batches.append((clock() - t0) / 100)
    nb = array.array("d", batches)
    comm.allreduce(nb, "max")
    if comm.rank == 0:
        print(json.dumps({
            "p": comm.size,
            "median_us": statistics.median(times) * 1e6,
            "loop_us": statistics.median(b) * 1e6,
            "nb_us": statistics.median(nb) * 1e6,
        }), flush=True)
    comm.close()


def run_json(cmd, env):
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=True,
                         timeout=600).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")][-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--p", default="1,2")
    ap.add_argument("--iters", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank:
        rank_main(args.iters)
        return 0
    build = os.path.abspath(args.build)
    crlaunch = os.path.join(build, "src", "crlaunch")
    crbench = os.path.join(build, "tools", "crbench")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(build, "src", "python")
    print("python_overhead: %s, %d repetitions, %d runs, 8-byte float32 allreduce"
          % (sys.executable, args.iters, args.runs))
    print("%3s %4s %10s %10s %10s %10s %12s" % ("p", "run", "C (us)", "Py (us)",
                                                 "loop (us)", "nb (us)", "overhead"))
    summary = []
    for p in [int(x) for x in args.p.split(",")]:
        rows = []
        for run in range(args.runs):
            c = run_json([crlaunch, "-n", str(p), crbench, "-b", "8", "-e", "8", "-d", "float",
                          "-n", str(args.iters), "-w", "200", "--json"], env)
            py = run_json([crlaunch, "-n", str(p), sys.executable, HERE, "--rank",
                           "--iters", str(args.iters)], env)
            row = (c["time_us"], py["median_us"], py["loop_us"], py["nb_us"])
            rows.append(row)
            print("%3d %4d %10.3f %10.3f %10.3f %10.3f %+11.3f us"
                  % (p, run, row[0], row[1], row[2], row[3], row[1] - row[0]),
                  flush=True)
        med = [statistics.median(x[i] for x in rows) for i in range(4)]
        over = statistics.median(x[1] - x[0] for x in rows)
        summary.append((p, med, over))
    print()
    for p, med, over in summary:
        print("p = %d: C %.3f us, Python %.3f us (back to back %.3f us, "
              "started and waited for %.3f us): overhead %.3f us per call "
              "(median of %d runs)"
              % (p, med[0], med[1], med[2], med[3], over, args.runs))
        if p == 1:
            # crbench's p = 1 figure holds its own timing around a call of
            # a few tens of ns; the back-to-back loop holds nothing else.
            print("       at p = 1 a whole Python call, crnet's work included, "
                  "takes %.3f us back to back: the module adds at most that"
                  % med[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
