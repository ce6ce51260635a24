"""Every operation of the crnet backend against a reference computed locally
(every rank can compute every rank's input, see torchtest.data): allreduce
over dtypes x ops x counts, the other collectives over roots and dtypes,
in place and not, non-contiguous tensors, calls in flight at once, futures,
and the errors that must come before anything is sent.

    crlaunch -n 4 /usr/bin/python3 tests/torch/test_ops.py
"""
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchtest import Checks, FLOATS, INTS, data, torch, dist  # noqa: E402

R = dist.ReduceOp
OPS = {"SUM": R.SUM, "PRODUCT": R.PRODUCT, "MIN": R.MIN, "MAX": R.MAX,
       "BAND": R.BAND, "BOR": R.BOR, "BXOR": R.BXOR, "AVG": R.AVG}
COUNTS = [0, 1, 7, 1031]


def reduce_ref(ts, op):
    """The reduction of tensors ts in rank order, as torch computes it."""
    acc = ts[0].clone()
    boolean = acc.dtype == torch.bool
    for t in ts[1:]:
        if op in ("SUM", "AVG"):
            acc = (acc | t) if boolean else acc + t
        elif op == "PRODUCT":
            acc = (acc & t) if boolean else acc * t
        elif op == "MIN":
            acc = (acc & t) if boolean else torch.minimum(acc, t)
        elif op == "MAX":
            acc = (acc | t) if boolean else torch.maximum(acc, t)
        elif op == "BAND":
            acc = acc & t
        elif op == "BOR":
            acc = acc | t
        elif op == "BXOR":
            acc = acc ^ t
    if op == "AVG":
        acc.div_(len(ts))
    return acc


def valid(dtype, op):
    """Whether crnet (and torch's Python layer) reduce dtype with op."""
    floating = dtype.is_floating_point
    if dtype.is_complex:
        return op in ("SUM", "AVG")
    if op in ("BAND", "BOR", "BXOR"):
        return not floating
    if op == "AVG":
        return floating
    return True


def main():
    dist.init_process_group("crnet")
    c = Checks("test_ops")
    r, p = dist.get_rank(), dist.get_world_size()
    c.ok(dist.get_backend() == "crnet", f"backend {dist.get_backend()}")
    seed = 0

    # --- allreduce: every dtype x op x count -----------------------------
    for dtype in FLOATS + INTS + [torch.bool, torch.complex64,
                                  torch.complex128]:
        for name, op in OPS.items():
            for n in COUNTS:
                seed += 1
                t = data(r, seed, n, dtype)
                what = f"all_reduce {name} {dtype} n={n}"
                if not valid(dtype, name):
                    c.raises(lambda: dist.all_reduce(t, op=op),
                             ["crnet" if not dtype.is_complex else "complex"],
                             what)
                    continue
                dist.all_reduce(t, op=op)
                want = reduce_ref([data(k, seed, n, dtype) for k in range(p)],
                                  name)
                c.equal(t, want, what)
    # A large one: the pipelined paths of the schedules.
    seed += 1
    n = (1 << 20) + 3
    t = data(r, seed, n, torch.float32)
    dist.all_reduce(t)
    c.equal(t, reduce_ref([data(k, seed, n, torch.float32)
                           for k in range(p)], "SUM"), "all_reduce 1M")
    # Non-contiguous: a transposed view works through a copy.
    seed += 1
    base = data(r, seed, (33, 17), torch.float64)
    view = base.t()
    dist.all_reduce(view, op=R.MAX)
    want = reduce_ref([data(k, seed, (33, 17), torch.float64)
                       for k in range(p)], "MAX")
    c.equal(base, want, "all_reduce of a transposed view")

    # all_reduce_coalesced: several tensors (one of them non-contiguous) in
    # one call. (torch 1.13 warns that it will deprecate the call.)
    warnings.filterwarnings("ignore", message=".*all_reduce_coalesced")
    for name in ["SUM", "AVG", "MAX"]:
        seed += 1
        ts = [data(r, seed * 64 + i, shape, torch.float64)
              for i, shape in enumerate([(5,), (3, 4), (0,), (7,)])]
        ts[1] = ts[1].t()
        dist.all_reduce_coalesced(ts, op=OPS[name])
        for i, shape in enumerate([(5,), (3, 4), (0,), (7,)]):
            ref = reduce_ref([data(k, seed * 64 + i, shape, torch.float64)
                              for k in range(p)], name)
            c.equal(ts[i], ref.t() if i == 1 else ref,
                    f"all_reduce_coalesced {name} tensor {i}")

    # --- many calls in flight, waited for in reverse; futures -------------
    works, want = [], []
    for i in range(24):
        seed += 1
        dtype = [torch.float32, torch.int32, torch.bfloat16][i % 3]
        t = data(r, seed, 100 + 13 * i, dtype)
        works.append((t, dist.all_reduce(t, async_op=True)))
        want.append(reduce_ref([data(k, seed, 100 + 13 * i, dtype)
                                for k in range(p)], "SUM"))
    for (t, w), ref in reversed(list(zip(works, want))):
        w.wait()
        c.equal(t, ref, "all_reduce in flight")
        c.ok(w.is_completed(), "is_completed after wait")
    futs = []
    for i in range(8):
        seed += 1
        t = data(r, seed, 50, torch.float64)
        fut = dist.all_reduce(t, async_op=True).get_future()
        futs.append((seed, fut.then(lambda f: f.value()[0] * 2)))
    for s, fut in futs:
        got = fut.wait()
        ref = reduce_ref([data(k, s, 50, torch.float64) for k in range(p)],
                         "SUM") * 2
        c.equal(got, ref, "future.then")
    # The future of a complete Work, asked for afterwards.
    t = torch.ones(3)
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    c.equal(w.get_future().wait()[0], torch.full((3,), float(p)),
            "get_future after wait")
    c.ok(w.result()[0] is not None, "Work.result")

    # --- broadcast ---------------------------------------------------------
    for root in range(p):
        for dtype in [torch.float32, torch.bool, torch.complex64, torch.int64,
                      torch.bfloat16]:
            for n in [0, 5, 70001]:
                seed += 1
                t = data(r, seed, n, dtype)
                dist.broadcast(t, src=root)
                c.equal(t, data(root, seed, n, dtype),
                        f"broadcast root={root} {dtype} n={n}")

    # --- reduce -----------------------------------------------------------
    for root in range(p):
        for dtype, name in [(torch.float32, "SUM"), (torch.int16, "MAX"),
                            (torch.float16, "MIN"), (torch.int64, "BXOR"),
                            (torch.float64, "AVG")]:
            seed += 1
            t = data(r, seed, 301, dtype)
            mine = t.clone()
            dist.reduce(t, dst=root, op=OPS[name])
            if r == root:
                c.equal(t, reduce_ref([data(k, seed, 301, dtype)
                                       for k in range(p)], name),
                        f"reduce {name} root={root}")
            else:
                c.equal(t, mine, "reduce leaves non-roots alone")

    # --- all_gather (list) and all_gather_into_tensor ---------------------
    for dtype in [torch.float32, torch.uint8, torch.bool, torch.float16]:
        for n in [0, 1, 999]:
            seed += 1
            t = data(r, seed, n, dtype)
            out = [torch.empty(n, dtype=dtype) for _ in range(p)]
            dist.all_gather(out, t)
            for k in range(p):
                c.equal(out[k], data(k, seed, n, dtype),
                        f"all_gather {dtype} n={n} block {k}")
            flat = torch.empty(n * p, dtype=dtype)
            dist.all_gather_into_tensor(flat, t)
            c.equal(flat, torch.cat([data(k, seed, n, dtype)
                                     for k in range(p)]),
                    f"all_gather_into_tensor {dtype} n={n}")
    # In place: the input is this rank's block of the output.
    seed += 1
    flat = torch.zeros(p * 64, dtype=torch.float64)
    flat[r * 64:(r + 1) * 64] = data(r, seed, 64, torch.float64)
    dist.all_gather_into_tensor(flat, flat[r * 64:(r + 1) * 64])
    c.equal(flat, torch.cat([data(k, seed, 64, torch.float64)
                             for k in range(p)]),
            "all_gather_into_tensor in place")
    # Non-contiguous outputs (columns of a matrix).
    seed += 1
    mat = torch.zeros(10, p, dtype=torch.int32)
    dist.all_gather([mat[:, k] for k in range(p)],
                    data(r, seed, 10, torch.int32))
    c.equal(mat, torch.stack([data(k, seed, 10, torch.int32)
                              for k in range(p)], 1),
            "all_gather into columns")

    # --- reduce_scatter (list, blocks of different sizes) and
    # reduce_scatter_tensor ----------------------------------------------
    sizes = [3 + 2 * k for k in range(p)]
    for dtype, name in [(torch.float32, "SUM"), (torch.int32, "PRODUCT"),
                        (torch.bfloat16, "MAX"), (torch.float64, "AVG"),
                        (torch.uint8, "BOR")]:
        seed += 1
        ins = [data(r, seed * 64 + j, sizes[j], dtype) for j in range(p)]
        out = torch.empty(sizes[r], dtype=dtype)
        dist.reduce_scatter(out, ins, op=OPS[name])
        c.equal(out, reduce_ref([data(k, seed * 64 + r, sizes[r], dtype)
                                 for k in range(p)], name),
                f"reduce_scatter {name} {dtype}")
        full = data(r, seed, 40 * p, dtype)
        out = torch.empty(40, dtype=dtype)
        dist.reduce_scatter_tensor(out, full, op=OPS[name])
        want = reduce_ref([data(k, seed, 40 * p, dtype) for k in range(p)],
                          name)[40 * r:40 * (r + 1)]
        c.equal(out, want, f"reduce_scatter_tensor {name} {dtype}")

    # --- all_to_all (lists, sizes that differ per pair) and
    # all_to_all_single (even, and with split sizes) ----------------------
    seed += 1
    ins = [data(r, seed * 64 + j, r + j + 1, torch.float32) for j in range(p)]
    outs = [torch.empty(k + r + 1) for k in range(p)]
    dist.all_to_all(outs, ins)
    for k in range(p):
        c.equal(outs[k], data(k, seed * 64 + r, k + r + 1, torch.float32),
                f"all_to_all from {k}")
    seed += 1
    src = data(r, seed, (4 * p, 3), torch.int64)
    dst = torch.empty_like(src)
    dist.all_to_all_single(dst, src)
    want = torch.cat([data(k, seed, (4 * p, 3), torch.int64)[4 * r:4 * r + 4]
                      for k in range(p)])
    c.equal(dst, want, "all_to_all_single even")
    seed += 1
    # Rank i sends j + 1 rows to rank j.
    in_splits = [j + 1 for j in range(p)]
    out_splits = [r + 1] * p
    src = data(r, seed, (sum(in_splits), 5), torch.float16)
    dst = torch.empty(sum(out_splits), 5, dtype=torch.float16)
    dist.all_to_all_single(dst, src, out_splits, in_splits)
    off = sum(in_splits[:r])
    want = torch.cat([data(k, seed, (sum(in_splits), 5),
                           torch.float16)[off:off + r + 1] for k in range(p)])
    c.equal(dst, want, "all_to_all_single with splits")

    # --- gather and scatter ----------------------------------------------
    for root in range(p):
        seed += 1
        t = data(r, seed, 77, torch.complex64)
        out = [torch.empty(77, dtype=torch.complex64) for _ in range(p)]
        dist.gather(t, out if r == root else None, dst=root)
        if r == root:
            for k in range(p):
                c.equal(out[k], data(k, seed, 77, torch.complex64),
                        f"gather root={root} from {k}")
        seed += 1
        ins = [data(root, seed * 64 + j, 33, torch.int8) for j in range(p)]
        out = torch.empty(33, dtype=torch.int8)
        dist.scatter(out, ins if r == root else None, src=root)
        c.equal(out, data(root, seed * 64 + r, 33, torch.int8),
                f"scatter root={root}")

    # --- the object collectives (pickles in byte tensors) -----------------
    objs = [None] * p
    dist.all_gather_object(objs, {"rank": r, "name": f"r{r}"})
    c.ok(objs == [{"rank": k, "name": f"r{k}"} for k in range(p)],
         f"all_gather_object: {objs}")
    box = [("from", r)] if r == p - 1 else [None]
    dist.broadcast_object_list(box, src=p - 1)
    c.ok(box == [("from", p - 1)], f"broadcast_object_list: {box}")

    dist.barrier()

    # --- errors: raised before anything is sent, on every rank alike ------
    sparse = torch.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (4,))
    c.raises(lambda: dist.all_reduce(sparse), ["crnet", "strided"],
             "sparse tensor")
    c.raises(lambda: dist.all_reduce(torch.ones(4), op=R.BAND),
             ["BAND", "integer"], "BAND on float")
    c.raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32),
                                     op=R.AVG),
             ["AVG", "floating"], "AVG on int32")
    q = torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.quint8)
    c.raises(lambda: dist.broadcast(q, src=0), ["quantized"],
             "quantized tensor")
    c.raises(lambda: dist.all_to_all_single(torch.empty(p, 2),
                                            torch.empty(p, 2), [1] * p,
                                            [2] * p),
             ["split"], "bad split sizes")
    c.raises(lambda: dist.reduce_scatter_tensor(torch.empty(3),
                                                torch.empty(3 * p + 1)),
             ["elements"], "reduce_scatter_tensor sizes")
    # Still in step after the refusals.
    t = torch.full((5,), float(r))
    dist.all_reduce(t)
    c.equal(t, torch.full((5,), float(sum(range(p)))), "after the errors")
    c.ok(crnet_torch_in_flight() == 0, "nothing in flight at the end")
    c.finish()


def crnet_torch_in_flight():
    import crnet_torch
    return crnet_torch.in_flight(dist.distributed_c10d._get_default_group())


if __name__ == "__main__":
    main()
