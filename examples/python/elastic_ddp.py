#!/usr/bin/env python3
"""DistributedDataParallel training that loses a rank and finishes on the
survivors, without restarting a process, or grows back to full size with a
restarted one (docs/TORCH.md, "Losing a rank"):

    crlaunch --keep-going -n 4 /usr/bin/python3 examples/python/elastic_ddp.py
    crlaunch --restart 1 -n 4 /usr/bin/python3 examples/python/elastic_ddp.py --grow

At --lose-step (default 50) the last rank kills itself with SIGKILL, as a
preempted VM would vanish. The survivors' step fails; after every step's
backward pass the ranks agree (crnet_torch.agree) whether it succeeded
everywhere, and take the optimizer step only then; otherwise they rebuild
the default process group from the survivors
(crnet_torch.shrink_default_group), wrap the model in DDP again and redo
the step. With --grow they grow it back instead
(crnet_torch.grow_default_group), waiting until crlaunch --restart's new
process of the lost rank has joined (crnet_torch.join_default_group in
it); rank 0 sends it the step, and DDP's own start sends it the
parameters, so it trains on from where the survivors are.

Each step trains on one global batch of --global-batch samples, dealt out
evenly over the ranks alive, so the averaged gradient is the whole batch's
whatever the number of ranks: --check verifies, at the end, that the
parameters are identical on every survivor and equal (to 1e-5) to one
process trained on the global batches alone. Exit 0 when they are.
"""
import argparse
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import crnet_torch


def make_model(features, classes):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(features, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, classes))


def global_batch(step, n, features, classes):
    g = torch.Generator().manual_seed(1_000_003 * step)
    x = torch.randn(n, features, generator=g)
    rule = torch.randn(features, classes,
                       generator=torch.Generator().manual_seed(12345))
    return x, (x @ rule).argmax(dim=1)


def params(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--lose-step", type=int, default=50)
    ap.add_argument("--global-batch", type=int, default=48,
                    help="divisible by every number of ranks alive")
    ap.add_argument("--features", type=int, default=16)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--grow", action="store_true",
                    help="grow back with the ranks crlaunch --restart starts")
    a = ap.parse_args()

    model = make_model(a.features, a.classes)
    state = torch.zeros(3, dtype=torch.int64)  # step, redone, size
    if crnet_torch.restarted():
        # In place of a lost rank: the survivors' state, then DDP (whose
        # start sends rank 0's parameters).
        rank, size = crnet_torch.join_default_group()
        dist.broadcast(state, 0)
        step, redone, size = (int(v) for v in state)
        print("rank %d restarted: joins at step %d" % (rank, step), file=sys.stderr)
    else:
        dist.init_process_group("crnet")
        rank, size = dist.get_rank(), dist.get_world_size()
        step, redone = 0, 0
    lost = size - 1
    ddp = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    while step < a.steps:
        if step == a.lose_step and rank == lost and size == dist.get_world_size() \
                and not crnet_torch.restarted():
            os.kill(os.getpid(), signal.SIGKILL)
        r, p = dist.get_rank(), dist.get_world_size()
        x, y = global_batch(step, a.global_batch, a.features, a.classes)
        share = a.global_batch // p
        opt.zero_grad(set_to_none=True)
        ok = True
        try:
            loss = torch.nn.functional.cross_entropy(
                ddp(x[r * share:(r + 1) * share]), y[r * share:(r + 1) * share])
            loss.backward()
        except RuntimeError as e:
            ok = False
            if r == 0:
                print("step %d failed: %s" % (step, str(e).splitlines()[0]),
                      file=sys.stderr)
        if crnet_torch.agree(ok):
            opt.step()
            step += 1
            continue
        # A rank was lost: go on with the survivors (and, with --grow, the
        # restarted ranks), redo the step.
        redone += 1
        if a.grow:
            r, p, admitted = crnet_torch.grow_default_group(size=size)
            if admitted > 0:
                state[:] = torch.tensor([step, redone, size])
                dist.broadcast(state, 0)
        else:
            r, p = crnet_torch.shrink_default_group()
        ddp = DDP(model)
        if r == 0:
            print("step %d: going on with %d ranks" % (step, p), file=sys.stderr)

    r, p = dist.get_rank(), dist.get_world_size()
    wrong = 0
    if a.check:
        mine = params(model)
        gathered = [torch.empty_like(mine) for _ in range(p)]
        dist.all_gather(gathered, mine)
        same = all(torch.equal(t, mine) for t in gathered)
        ref = make_model(a.features, a.classes)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        for s in range(a.steps):
            x, y = global_batch(s, a.global_batch, a.features, a.classes)
            ref_opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(ref(x), y).backward()
            ref_opt.step()
        close = torch.allclose(mine, params(ref), atol=1e-5, rtol=1e-5)
        wrong = 0 if same and close else 1
        if r == 0:
            print("elastic_ddp: %d steps, %d ranks at the end of %d, %d step(s) "
                  "redone; parameters %s on every rank, %s a single process's"
                  % (a.steps, p, size, redone, "identical" if same else "DIFFERENT",
                     "equal to" if close else "NOT equal to"))
    elif r == 0:
        print("elastic_ddp: %d steps, %d ranks at the end of %d, %d step(s) redone"
              % (a.steps, p, size, redone))
    dist.destroy_process_group()
    return wrong


if __name__ == "__main__":
    sys.exit(main())
