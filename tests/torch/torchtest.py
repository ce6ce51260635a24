"""What the tests of tests/torch share: the skip when torch is absent, the
job's setup, checks that count failures instead of stopping (so that every
rank keeps making the same calls), and the deterministic data every rank can
compute for every other rank (so references need no communication)."""
import faulthandler
import os
import sys
import time

# A rank still running after this long prints every thread's Python stack
# and exits 1, before crlaunch's --timeout stops the job without a word.
faulthandler.dump_traceback_later(
    float(os.environ.get("CRNET_TEST_STACKS_AFTER", "150")), exit=True)


def need_torch():
    """Exits 77 (meson's skip) when this interpreter has no torch."""
    try:
        import torch  # noqa: F401
        import torch.distributed  # noqa: F401
    except ImportError as e:
        # A named skip (tests/skip.h); under CRNET_TEST_STRICT=1 (as root,
        # where tools/quickstart.sh has installed python3-torch) a failure.
        name = os.path.basename(sys.argv[0])
        why = f"torch is not installed for {sys.executable} ({e})"
        if os.environ.get("CRNET_TEST_STRICT") == "1":
            print(f"FAIL: {name} cannot run: {why} (CRNET_TEST_STRICT=1)",
                  flush=True)
            sys.exit(1)
        print(f"SKIP {name}: {why}", flush=True)
        sys.exit(77)


need_torch()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import crnet_torch  # noqa: E402,F401  (registers the backend)

torch.set_num_threads(1)


class Checks:
    """Counts failed checks; finish() exits 1 if any rank had one."""

    def __init__(self, name):
        self.name = name
        self.failed = 0
        self.passed = 0
        self.t0 = time.monotonic()

    def rank(self):
        return dist.get_rank() if dist.is_initialized() else -1

    def ok(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print(f"rank {self.rank()}: FAIL: {what}", flush=True)
        return cond

    def equal(self, got, want, what):
        same = (got.dtype == want.dtype and got.shape == want.shape
                and torch.equal(got, want))
        if not same:
            self.ok(False, f"{what}: got {short(got)}, want {short(want)}")
        else:
            self.passed += 1
        return same

    def raises(self, fn, words, what):
        """fn() must raise RuntimeError (or ValueError) whose message holds
        every one of `words`."""
        try:
            fn()
        except (RuntimeError, ValueError) as e:
            msg = str(e)
            missing = [w for w in words if w not in msg]
            return self.ok(not missing,
                           f"{what}: message lacks {missing}: {msg!r}")
        return self.ok(False, f"{what}: no exception")

    def finish(self):
        bad = torch.tensor([self.failed], dtype=torch.int64)
        dist.all_reduce(bad)
        secs = time.monotonic() - self.t0
        if self.rank() == 0:
            print(f"{self.name}: p={dist.get_world_size()}: "
                  f"{self.passed} checks on rank 0, "
                  f"{int(bad.item())} failed on all ranks, {secs:.1f} s",
                  flush=True)
        dist.destroy_process_group()
        sys.exit(1 if bad.item() else 0)


def short(t):
    flat = t.reshape(-1)
    s = flat[:8].tolist()
    return f"{t.dtype}{tuple(t.shape)} {s}{' ...' if flat.numel() > 8 else ''}"


FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]


def data(rank, seed, shape, dtype):
    """Rank `rank`'s tensor for test `seed`: small integers (exact in every
    dtype, products of four of them too), the same wherever computed."""
    g = torch.Generator().manual_seed(1_000_003 * seed + rank)
    if isinstance(shape, int):
        shape = (shape,)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_complex:
        parts = torch.randint(-3, 4, tuple(shape) + (2,), generator=g)
        real = torch.float32 if dtype == torch.complex64 else torch.float64
        return torch.view_as_complex(parts.to(real).contiguous())
    lo = 0 if dtype == torch.uint8 else -3
    return torch.randint(lo, 4, shape, generator=g).to(dtype)
