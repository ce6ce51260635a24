#!/usr/bin/env python3
"""torch.distributed over crnet against torch's own Gloo, in the same run:

    crlaunch -n P /usr/bin/python3 tools/bench/torch_vs_gloo.py [--ddp]

with crnet_torch importable (PYTHONPATH=<build>/src/torch, or installed).
The default group is crnet's; a second group over the same ranks is
Gloo's (dist.new_group(backend="gloo")), so both see the same processes,
the same tensors and the same moment. For each size (float32
dist.all_reduce, SUM, 8 B and 16 MiB by default) the two backends take
turns, batch after batch (which one goes first alternates); a batch is
`calls` back-to-back blocking all_reduce calls after a barrier of the
group, and its time per call is the slowest rank's. Printed: the median
over the batches per backend, the bus bandwidth of that median in the
conventions of nccl-tests (allreduce: 2(p-1)/p x bytes / time), and the
ratio. --ddp adds the step time of examples/python/ddp_train.py's model
under DistributedDataParallel, one step of each backend in turn (medians
after a warm-up), and what DDP's own timers say about the overlap of the
gradient allreduce with the backward pass.

Targets of issue 19: 8 B <= 0.1 x Gloo's time; 16 MiB bus bandwidth
>= 1.3 x Gloo's; DDP step time <= Gloo's.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

try:
    import crnet.torch  # noqa: F401
except ImportError:
    import crnet_torch  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "python"))


def slowest(x, group):
    t = torch.tensor([x], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.item()


def batch_time(t, group, calls):
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(calls):
        dist.all_reduce(t, group=group)
    return (time.perf_counter() - t0) / calls


def allreduce_rows(groups, sizes, batches, budget_s):
    p = dist.get_world_size()
    rows = []
    for nbytes in sizes:
        n = max(1, nbytes // 4)
        t = torch.ones(n, dtype=torch.float32)
        # Calls per batch: about budget_s / batches per backend, from a
        # first timing of each (also the warm-up).
        calls = {}
        for name, g in groups.items():
            batch_time(t, g, 2)
            one = slowest(batch_time(t, g, 3), g)
            calls[name] = max(1, min(2000, int(budget_s / batches / one)))
        # The same number of calls for both: the smaller.
        k = min(calls.values())
        times = {name: [] for name in groups}
        names = list(groups)
        for b in range(batches):
            order = names if b % 2 == 0 else names[::-1]
            for name in order:
                g = groups[name]
                times[name].append(slowest(batch_time(t, g, k), g))
        med = {name: statistics.median(v) for name, v in times.items()}
        row = {"bytes": n * 4, "p": p, "calls_per_batch": k,
               "batches": batches}
        for name in names:
            row[name + "_us"] = med[name] * 1e6
            row[name + "_min_us"] = min(times[name]) * 1e6
            row[name + "_max_us"] = max(times[name]) * 1e6
            row[name + "_busbw_GBps"] = 2 * (p - 1) / p * n * 4 / med[name] / 1e9
        row["time_ratio"] = med["crnet"] / med["gloo"]
        row["busbw_ratio"] = med["gloo"] / med["crnet"]
        rows.append(row)
    return rows


def ddp_rows(groups, steps, warmup):
    from ddp_train import make_batch, make_model
    from torch.nn.parallel import DistributedDataParallel as DDP
    r = dist.get_rank()
    models, opts, times = {}, {}, {}
    for name, g in groups.items():
        models[name] = DDP(make_model(64, 512, 10), process_group=g)
        opts[name] = torch.optim.SGD(models[name].parameters(), lr=0.05,
                                     momentum=0.9)
        times[name] = []
    names = list(groups)
    for s in range(warmup + steps):
        order = names if s % 2 == 0 else names[::-1]
        x, y = make_batch(s, r, 32, 64, 10)
        for name in order:
            g, m, o = groups[name], models[name], opts[name]
            dist.barrier(group=g)
            t0 = time.perf_counter()
            o.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(m(x), y).backward()
            o.step()
            dt = time.perf_counter() - t0
            if s >= warmup:
                times[name].append(slowest(dt, g))
    row = {"p": dist.get_world_size(), "steps": steps,
           "params": sum(q.numel() for q in models[names[0]].parameters())}
    for name in names:
        row[name + "_step_ms"] = statistics.median(times[name]) * 1e3
        stats = models[name]._get_ddp_logging_data()
        for k in ["avg_backward_compute_time", "avg_backward_comm_time",
                  "avg_backward_compute_comm_overlap_time"]:
            if stats.get(k):
                row[f"{name}_{k[4:]}_ms"] = stats[k] / 1e6
    row["step_ratio"] = row["crnet_step_ms"] / row["gloo_step_ms"]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="8,16777216",
                    help="bytes per all_reduce, comma-separated")
    ap.add_argument("--batches", type=int, default=11)
    ap.add_argument("--budget", type=float, default=4.0,
                    help="seconds per backend and size, about")
    ap.add_argument("--ddp", action="store_true")
    ap.add_argument("--ddp-steps", type=int, default=30)
    ap.add_argument("--json", help="append the rows to this file (rank 0)")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="also the fastest and slowest batch")
    args = ap.parse_args()
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)
    dist.init_process_group("crnet")
    groups = {"crnet": dist.distributed_c10d._get_default_group(),
              "gloo": dist.new_group(backend="gloo")}
    r, p = dist.get_rank(), dist.get_world_size()
    rows = allreduce_rows(groups, [int(s) for s in args.sizes.split(",")],
                          args.batches, args.budget)
    ddp = ddp_rows(groups, args.ddp_steps, 5) if args.ddp else None
    if r == 0:
        cores = os.cpu_count()
        print(f"torch_vs_gloo: p={p} on {cores} core(s)"
              f"{' (ranks share cores)' if p > cores else ''}, "
              f"torch {torch.__version__}")
        print(f"{'bytes':>10} {'crnet us':>10} {'gloo us':>10} "
              f"{'crnet/gloo':>10} {'crnet GB/s':>10} {'gloo GB/s':>10} "
              f"{'busbw x':>8}")
        for row in rows:
            print(f"{row['bytes']:>10} {row['crnet_us']:>10.1f} "
                  f"{row['gloo_us']:>10.1f} {row['time_ratio']:>10.3f} "
                  f"{row['crnet_busbw_GBps']:>10.3f} "
                  f"{row['gloo_busbw_GBps']:>10.3f} "
                  f"{row['busbw_ratio']:>8.2f}")
            if args.verbose:
                print(f"{'':>10} batches: crnet {row['crnet_min_us']:.1f}.."
                      f"{row['crnet_max_us']:.1f} us, gloo "
                      f"{row['gloo_min_us']:.1f}..{row['gloo_max_us']:.1f} us, "
                      f"{row['calls_per_batch']} calls each")
        if ddp:
            print(f"DDP step ({ddp['params']} parameters, median of "
                  f"{ddp['steps']}): crnet {ddp['crnet_step_ms']:.2f} ms, "
                  f"gloo {ddp['gloo_step_ms']:.2f} ms, "
                  f"ratio {ddp['step_ratio']:.3f}")
            for name in groups:
                parts = [f"{k[len(name) + 1:-3]} {v:.2f}" for k, v in ddp.items()
                         if k.startswith(name + "_") and k.endswith("_time_ms")]
                if parts:
                    print(f"  {name}: DDP's timers (ms): " + ", ".join(parts))
        if args.json:
            with open(args.json, "a") as f:
                for row in rows + ([ddp] if ddp else []):
                    f.write(json.dumps(row) + "\n")
        sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
