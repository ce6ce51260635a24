"""DistributedDataParallel over the crnet backend: a small model trained for
20 steps on synthetic batches (rank k's batch of step s from a fixed seed).

  1. default DDP, buckets of 10 KB (several allreduces in flight per step):
     the parameters are bitwise identical on every rank, and equal, to
     within TOL, to one process trained on the concatenated batches of all
     ranks (the same mean gradient, summed in another order);
  2. the fp16 compression comm hook (a future with a Python then(), run by
     crnet's completion path) with gradient_as_bucket_view: bitwise
     identical on every rank, and within TOL_FP16 of the same reference;
  3. with --gloo, the run of 1. again over a Gloo group of the same ranks
     (the same store): within TOL_GLOO of crnet's parameters (bitwise
     equal where both sum in the same order; the figure is printed).

    crlaunch -n 4 /usr/bin/python3 tests/torch/test_ddp.py
    tests/torch/envrun.py -n 2 /usr/bin/python3 tests/torch/test_ddp.py --gloo
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchtest import Checks, torch, dist  # noqa: E402

from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402

STEPS = 20
BATCH = 8
# float32 gradients averaged in another order than the reference's: a few
# units in the last place per step, compounded over 20 steps (measured: 3e-8
# at p = 2 and 4).
TOL = 1e-6
# Gradients rounded to float16 before they are summed (measured: 3e-5).
TOL_FP16 = 5e-4
# The same average of gradients, summed by each backend's schedule: at
# p = 2 both add the same two numbers (bitwise equal); at p > 2 the order
# may differ, by units in the last place per step.
TOL_GLOO = 1e-6


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.Tanh(),
        torch.nn.Linear(64, 64), torch.nn.Tanh(),
        torch.nn.Linear(64, 8))


def batch(step, rank):
    g = torch.Generator().manual_seed(10_000 * step + rank)
    return torch.randn(BATCH, 32, generator=g), torch.randn(BATCH, 8, generator=g)


def train(net, steps, batches):
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    for s in range(steps):
        x, y = batches(s)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
    return loss.item()


def flat(net):
    return torch.cat([q.detach().reshape(-1) for q in net.parameters()])


def reference(p):
    net = model()
    train(net, STEPS, lambda s: tuple(torch.cat(z) for z in
                                      zip(*[batch(s, k) for k in range(p)])))
    return flat(net)


def identical_everywhere(c, mine, what):
    p = dist.get_world_size()
    every = [torch.empty_like(mine) for _ in range(p)]
    dist.all_gather(every, mine)
    for k in range(p):
        c.ok(torch.equal(every[k], every[0]),
             f"{what}: rank {k}'s parameters differ from rank 0's "
             f"(max |diff| {(every[k] - every[0]).abs().max().item():.3g})")


def main():
    dist.init_process_group("crnet")
    c = Checks("test_ddp")
    r, p = dist.get_rank(), dist.get_world_size()
    ref = reference(p)

    net = DDP(model(), bucket_cap_mb=0.01)
    loss = train(net, STEPS, lambda s: batch(s, r))
    mine = flat(net.module)
    crnet_params = mine
    identical_everywhere(c, mine, "DDP")
    diff = (mine - ref).abs().max().item()
    c.ok(diff <= TOL, f"DDP vs one process: max |diff| {diff:.3g} > {TOL}")
    if r == 0:
        print(f"DDP p={p}: loss {loss:.6f}, max |diff| to one process "
              f"{diff:.3g} (tolerance {TOL})", flush=True)

    net = DDP(model(), bucket_cap_mb=0.01, gradient_as_bucket_view=True)
    net.register_comm_hook(dist.distributed_c10d._get_default_group(),
                           default_hooks.fp16_compress_hook)
    loss = train(net, STEPS, lambda s: batch(s, r))
    mine = flat(net.module)
    identical_everywhere(c, mine, "DDP fp16 hook")
    diff = (mine - ref).abs().max().item()
    c.ok(diff <= TOL_FP16,
         f"DDP fp16 hook vs one process: max |diff| {diff:.3g} > {TOL_FP16}")
    if r == 0:
        print(f"DDP fp16 hook p={p}: loss {loss:.6f}, max |diff| to one "
              f"process {diff:.3g} (tolerance {TOL_FP16})", flush=True)

    if "--gloo" in sys.argv[1:]:
        gloo = dist.new_group(backend="gloo")
        net = DDP(model(), bucket_cap_mb=0.01, process_group=gloo)
        train(net, STEPS, lambda s: batch(s, r))
        diff = (flat(net.module) - crnet_params).abs().max().item()
        c.ok(diff <= TOL_GLOO,
             f"DDP over Gloo vs over crnet: max |diff| {diff:.3g} > {TOL_GLOO}")
        if r == 0:
            print(f"DDP p={p}: Gloo's parameters vs crnet's: max |diff| "
                  f"{diff:.3g}{' (bitwise equal)' if diff == 0 else ''} "
                  f"(tolerance {TOL_GLOO})", flush=True)
    c.finish()


if __name__ == "__main__":
    main()
