#!/usr/bin/env python3
"""A small model trained with DistributedDataParallel on synthetic data, over
crnet's torch.distributed backend, or Gloo's for comparison:

    crlaunch -n 4 /usr/bin/python3 examples/python/ddp_train.py
    crlaunch -n 4 /usr/bin/python3 examples/python/ddp_train.py --backend gloo

(with crnet_torch importable: installed by `meson install`, or
PYTHONPATH=<build>/src/torch). Under crlaunch nothing else is needed: ranks
and size come from crnet's environment, and so does the store torch keeps
for itself, for either backend (docs/TORCH.md).

Everything is seeded: the model's initial weights (the same on every rank;
DDP would broadcast rank 0's anyway) and rank k's batch of step s, so every
run gives the same numbers. --check verifies, at the end, that the
parameters are bitwise identical on every rank and equal (to 1e-6) to one
process trained on the concatenated batches of all ranks; --bench prints
the median step time and what DDP's own timers say about the overlap of
the gradient allreduce with the backward pass.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    import crnet.torch  # noqa: F401  (the crnet package, once it has it)
except ImportError:
    import crnet_torch  # noqa: F401  (registers the backend "crnet")


def make_model(features, hidden, classes):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(features, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, classes))


def make_batch(step, rank, batch, features, classes):
    """Rank `rank`'s batch of step `step`: inputs, and labels from a fixed
    linear rule (so that there is something to learn)."""
    g = torch.Generator().manual_seed(1_000_003 * step + rank)
    x = torch.randn(batch, features, generator=g)
    w = torch.Generator().manual_seed(12345)
    rule = torch.randn(features, classes, generator=w)
    return x, (x @ rule).argmax(dim=1)


def train(model, steps, batches, lr, on_step=None):
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss = None
    for s in range(steps):
        t0 = time.perf_counter()
        x, y = batches(s)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if on_step is not None:
            on_step(s, loss, time.perf_counter() - t0)
    return loss.item()


def params(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="crnet", choices=["crnet", "gloo"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32, help="per rank")
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--bucket-mb", type=float, default=25,
                    help="DDP's bucket_cap_mb")
    ap.add_argument("--check", action="store_true",
                    help="verify the parameters against one process")
    ap.add_argument("--bench", action="store_true",
                    help="print the median step time and DDP's timers")
    args = ap.parse_args()
    if "OMP_NUM_THREADS" not in os.environ:
        # Ranks share the host's cores; torch's own threads on top of
        # them only get in each other's way.
        torch.set_num_threads(1)

    dist.init_process_group(args.backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    model = DDP(make_model(args.features, args.hidden, args.classes),
                bucket_cap_mb=args.bucket_mb)
    nparams = sum(p.numel() for p in model.parameters())
    if rank == 0:
        print(f"ddp_train: {args.backend}, {size} rank(s), {nparams} "
              f"parameters, batch {args.batch} per rank, {args.steps} steps",
              flush=True)

    times = []

    def on_step(s, loss, secs):
        times.append(secs)
        if rank == 0 and (s % 10 == 0 or s == args.steps - 1):
            print(f"step {s:4d}  loss {loss.item():.6f}", flush=True)

    loss = train(model, args.steps,
                 lambda s: make_batch(s, rank, args.batch, args.features,
                                      args.classes),
                 args.lr, on_step)
    mine = params(model.module)
    ok = True
    if args.check:
        every = [torch.empty_like(mine) for _ in range(size)]
        dist.all_gather(every, mine)
        same = all(torch.equal(e, every[0]) for e in every)
        ref_model = make_model(args.features, args.hidden, args.classes)

        def all_batches(s):
            parts = [make_batch(s, k, args.batch, args.features, args.classes)
                     for k in range(size)]
            return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        train(ref_model, args.steps, all_batches, args.lr)
        diff = (mine - params(ref_model)).abs().max().item()
        ok = same and diff <= 1e-6
        if rank == 0 or not ok:
            print(f"check (rank {rank}): parameters "
                  f"{'identical' if same else 'DIFFERENT'} on every rank; "
                  f"max |diff| to one process {diff:.3g} (tolerance 1e-6)",
                  flush=True)
    if args.bench:
        # The first steps warm up (DDP rebuilds its buckets after the
        # first): the median of the rest.
        med = torch.tensor([statistics.median(times[min(5, len(times) - 1):])])
        every = [torch.empty_like(med) for _ in range(size)]
        dist.all_gather(every, med)
        stats = model._get_ddp_logging_data()
        if rank == 0:
            worst = max(e.item() for e in every)
            print(f"bench: {args.backend} p={size}: median step "
                  f"{med.item() * 1e3:.2f} ms on rank 0, "
                  f"{worst * 1e3:.2f} ms on the slowest rank", flush=True)
            keys = ["avg_forward_compute_time", "avg_backward_compute_time",
                    "avg_backward_comm_time",
                    "avg_backward_compute_comm_overlap_time"]
            shown = {k: stats.get(k) for k in keys if stats.get(k)}
            if shown:
                print("bench: DDP's timers (ms, sampled iterations): " +
                      ", ".join(f"{k[4:]} {v / 1e6:.2f}"
                                for k, v in shown.items()), flush=True)
    if rank == 0:
        print(f"ddp_train: final loss {loss:.6f}", flush=True)
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
