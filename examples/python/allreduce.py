"""allreduce.py: crnet from Python with NumPy.

    crlaunch -n 4 /usr/bin/python3 examples/python/allreduce.py

(from the build tree with PYTHONPATH=<builddir>/src/python, or after
`meson install`). Every rank

  1. sums a vector over all ranks in place, and takes the maximum into a
     separate output (out=);
  2. starts an allreduce without waiting (iallreduce), computes meanwhile,
     and waits for it;
  3. splits the job into even and odd ranks and sums over its half;

and checks every result against what it computes alone: each rank's input
is a function of its rank. Rank 0 prints one line per step; the exit status
is 1 if any result is wrong.
"""

import sys

import numpy as np

import crnet


def main():
    with crnet.Comm() as comm:
        p, r = comm.size, comm.rank
        n = 1 << 20
        ok = True

        # 1. In place: a becomes the element-wise sum over every rank.
        a = np.arange(n, dtype=np.float32) + r
        comm.allreduce(a)
        want = np.arange(n, dtype=np.float32) * p + p * (p - 1) / 2
        ok &= np.array_equal(a, want)
        # Into out=, with another operator; the input stays as it was.
        x = np.full(4, r, dtype=np.int64)
        top = comm.allreduce(x, "max", out=np.empty_like(x))
        ok &= bool((top == p - 1).all() and (x == r).all())
        if r == 0:
            print("allreduce: %d floats summed over %d ranks, max %d" % (n, p, top[0]))

        # 2. Nonblocking: the sum travels while the rank computes. The
        # buffers belong to crnet until wait() returns.
        b = np.ones(n, dtype=np.float64) * (r + 1)
        req = comm.iallreduce(b)
        local = np.sqrt(np.arange(n, dtype=np.float64)).sum()  # other work
        req.wait()
        ok &= bool((b == p * (p + 1) / 2).all()) and local > 0
        if r == 0:
            print("iallreduce: overlapped with %.3g of local work" % local)

        # 3. A sub-communicator of the even or the odd ranks.
        with comm.split(r % 2) as half:
            c = np.array([r], dtype=np.int32)
            half.allreduce(c)
            ok &= int(c[0]) == sum(q for q in range(p) if q % 2 == r % 2)
            if r == 0:
                print("split: %d ranks in rank 0's half, sum of their ranks %d"
                      % (half.size, c[0]))

        # Every rank's verdict: the job is fine only if all are.
        verdict = np.array([ok], dtype=np.bool_)
        comm.allreduce(verdict, "land")
        if r == 0:
            print("all results right" if verdict[0] else "WRONG results")
        return 0 if verdict[0] else 1


if __name__ == "__main__":
    sys.exit(main())
