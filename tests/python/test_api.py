"""The Python module crnet through real ranks: every call, every NumPy dtype
crnet supports, in place and not, against NumPy references.

    crlaunch -n P /usr/bin/python3 tests/python/test_api.py [NAME ...]

(with PYTHONPATH=<builddir>/src/python; meson test --suite python runs it
at p = 1, 2, 3, 4). Every rank runs the same tests in the same order; the
input of rank r is a function of r (gen below), so that every rank
computes every other rank's input and the expected result locally. A
failure prints the rank and the test, aborts the job (so that the other
ranks stop at once instead of waiting in a collective) and exits 1.
Exits 77 (meson's skip) only when NumPy cannot be imported.
"""

import array
import functools
import gc
import os
import sys
import threading
import time
import traceback

try:
    import numpy as np
except ImportError:
    # A named skip (tests/skip.h); a failure under CRNET_TEST_STRICT=1.
    if os.environ.get("CRNET_TEST_STRICT") == "1":
        print("FAIL: test_api cannot run: NumPy is not installed for %s "
              "(CRNET_TEST_STRICT=1)" % sys.executable)
        sys.exit(1)
    print("SKIP test_api: NumPy is not installed for %s" % sys.executable)
    sys.exit(77)

import crnet
from time_scale import seconds  # noqa: E402

# Every NumPy dtype crnet has a datatype for (by kind and item size), with
# the operators that apply to it.
INT_OPS = ["sum", "prod", "min", "max", "band", "bor", "bxor", "land", "lor"]
FLOAT_OPS = ["sum", "prod", "min", "max", "land", "lor"]
BOOL_OPS = ["min", "max", "band", "bor", "bxor", "land", "lor"]
DTYPES = {
    np.int8: INT_OPS,
    np.int16: INT_OPS,
    np.int32: INT_OPS,
    np.int64: INT_OPS,
    np.longlong: INT_OPS,
    np.intc: INT_OPS,
    np.uint8: INT_OPS,
    np.uint16: INT_OPS,
    np.uint32: INT_OPS,
    np.uint64: INT_OPS,
    np.ulonglong: INT_OPS,
    np.float16: FLOAT_OPS,
    np.float32: FLOAT_OPS,
    np.float64: FLOAT_OPS,
    np.bool_: BOOL_OPS,
    np.complex64: ["sum"],
    np.complex128: ["sum"],
}

UFUNC = {
    "sum": np.add,
    "prod": np.multiply,
    "min": np.minimum,
    "max": np.maximum,
    "band": np.bitwise_and,
    "bor": np.bitwise_or,
    "bxor": np.bitwise_xor,
    "land": np.logical_and,
    "lor": np.logical_or,
}

CONSTANT = {
    "sum": crnet.SUM,
    "prod": crnet.PROD,
    "min": crnet.MIN,
    "max": crnet.MAX,
    "band": crnet.BAND,
    "bor": crnet.BOR,
    "bxor": crnet.BXOR,
    "land": crnet.LAND,
    "lor": crnet.LOR,
}


def gen(rank, n, dtype, op="sum", salt=0):
    """Rank `rank`'s input: small values whose reductions over 4 ranks are
    exact in every dtype (prod: 1s and 2s; signed types get negatives)."""
    dtype = np.dtype(dtype)
    i = np.arange(n, dtype=np.int64)
    if dtype.kind == "b":
        return ((i * 3 + rank + salt) % 3 == 0).astype(dtype)
    if op == "prod":
        v = (i + rank + salt) % 2 + 1
    else:
        v = (i * 7 + rank * 13 + salt * 5) % 11
        if dtype.kind in "ifc":
            v = v - 5
    if dtype.kind == "c":
        return (v + 1j * ((v * 3 + rank) % 5)).astype(dtype)
    return v.astype(dtype)


def reduce_ref(arrays, op, dtype):
    """The reduction of the ranks' arrays, computed as NumPy computes it."""
    f = UFUNC[op]
    if op in ("land", "lor"):
        # Logical results are 0 or 1, also of one rank's input alone.
        arrays = [a != 0 for a in arrays]
    out = functools.reduce(lambda a, b: f(a, b), arrays)
    return np.asarray(out).astype(dtype)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def same(got, want, what):
    got = np.asarray(got)
    want = np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        raise AssertionError(
            "%s: got %s %s, want %s %s" % (what, got.dtype, got.shape, want.dtype, want.shape)
        )
    if not np.array_equal(got, want):
        bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
        raise AssertionError(
            "%s: %d elements differ, first at %d: got %r, want %r"
            % (what, bad.size, bad[0], got.reshape(-1)[bad[0]], want.reshape(-1)[bad[0]])
        )


def raises(exc, fn, what):
    try:
        fn()
    except exc as e:
        return e
    except Exception as e:  # the wrong kind
        raise AssertionError("%s: raised %r, want %s" % (what, e, exc.__name__))
    raise AssertionError("%s: raised nothing, want %s" % (what, exc.__name__))


def name_of(dtype):
    return np.dtype(dtype).name


def op_arg(op, k):
    """Alternately a name and a constant, so both forms are exercised."""
    return op if k % 2 == 0 else CONSTANT[op]


def counts_for(p):
    return [0, 1, p + 1, 257]


# --- the tests, run in this order on every rank ----------------------------


def test_basics(comm):
    p, r = comm.size, comm.rank
    check(0 <= r < p, "rank %d of %d" % (r, p))
    check(comm.is_world and not comm.closed, "world, open")
    check(str(p) in repr(comm), repr(comm))
    check(int(os.environ.get("CRNET_SIZE", "1")) == p, "CRNET_SIZE")
    e = raises(crnet.InvalidArgument, crnet.Comm, "a second Comm()")
    check(isinstance(e, ValueError) and isinstance(e, crnet.Error), "class")
    check(e.code == crnet.EINVAL and e.name == "CRNET_EINVAL", "code")
    check("one world comm" in str(e), str(e))
    check(crnet.IN_PLACE is crnet.IN_PLACE and repr(crnet.IN_PLACE) == "crnet.IN_PLACE", "IN_PLACE")
    for cls in (crnet.PeerLost, crnet.Timeout, crnet.Mismatch, crnet.Aborted,
                crnet.AuthError, crnet.Truncated, crnet.Cancelled,
                crnet.Unsupported,
                crnet.InvalidArgument, crnet.OutOfMemory, crnet.NetworkError):
        check(issubclass(cls, crnet.Error), cls.__name__)
    check(issubclass(crnet.PeerLost, ConnectionError), "PeerLost is a ConnectionError")
    check(issubclass(crnet.Timeout, TimeoutError), "Timeout is a TimeoutError")
    check(crnet.strerror(crnet.EPEER) == "a peer process is gone", "strerror")
    check(comm.barrier() is None, "barrier returns None")


def test_allreduce(comm):
    p = comm.size
    k = 0
    for dtype, ops in DTYPES.items():
        for op in ops:
            for n in counts_for(p):
                ins = [gen(q, n, dtype, op) for q in range(p)]
                want = reduce_ref(ins, op, dtype)
                x = ins[comm.rank].copy()
                out = np.full(n, 3, dtype=dtype)
                res = comm.allreduce(x, op_arg(op, k), out=out)
                check(res is out, "allreduce returns out")
                same(out, want, "allreduce %s %s n=%d" % (name_of(dtype), op, n))
                same(x, ins[comm.rank], "allreduce input untouched")
                y = ins[comm.rank].copy()
                check(comm.allreduce(y, op=op_arg(op, k + 1)) is y, "in place returns buf")
                same(y, want, "allreduce in place %s %s n=%d" % (name_of(dtype), op, n))
                z = ins[comm.rank].copy()
                comm.allreduce(crnet.IN_PLACE, op, out=z)
                same(z, want, "allreduce IN_PLACE %s %s" % (name_of(dtype), op))
                z = ins[comm.rank].copy()
                check(comm.allreduce(z, op, out=z) is z, "the same buffer twice")
                same(z, want, "allreduce buf is out %s %s" % (name_of(dtype), op))
                k += 1
    # Any shape, C order: items in memory order.
    m = np.arange(12, dtype=np.int32).reshape(3, 4) * (comm.rank + 1)
    comm.allreduce(m)
    same(m, np.arange(12, dtype=np.int32).reshape(3, 4) * (p * (p + 1) // 2), "2-D")


def test_reduce_scatter(comm):
    p, r = comm.size, comm.rank
    for dtype, ops in DTYPES.items():
        op = ops[0] if dtype is not np.bool_ else "lor"
        for n in (0, 1, 3):
            ins = [gen(q, n * p, dtype, op) for q in range(p)]
            want = reduce_ref(ins, op, dtype)[r * n:(r + 1) * n]
            out = np.empty(n, dtype=dtype)
            check(comm.reduce_scatter(ins[r].copy(), op, out=out) is out, "returns out")
            same(out, want, "reduce_scatter %s n=%d" % (name_of(dtype), n))
            y = ins[r].copy()
            comm.reduce_scatter(y, op)
            same(y[:n], want, "reduce_scatter in place %s n=%d" % (name_of(dtype), n))
        # Irregular blocks: rank q gets q + 1 items (rank 0 of p = 1: 1).
        counts = [(q % 3) + 1 for q in range(p)]
        if p > 1:
            counts[1] = 0
        total = sum(counts)
        ins = [gen(q, total, dtype, op, salt=2) for q in range(p)]
        full = reduce_ref(ins, op, dtype)
        at = sum(counts[:r])
        want = full[at:at + counts[r]]
        out = np.empty(counts[r], dtype=dtype)
        comm.reduce_scatter(ins[r].copy(), op, out=out, counts=counts)
        same(out, want, "reduce_scatter counts %s" % name_of(dtype))
        y = ins[r].copy()
        comm.reduce_scatter(y, op, counts=np.array(counts))
        same(y[:counts[r]], want, "reduce_scatter counts in place %s" % name_of(dtype))


def test_allgather_alltoall(comm):
    p, r = comm.size, comm.rank
    for dtype in DTYPES:
        for n in (0, 1, 5):
            ins = [gen(q, n, dtype) for q in range(p)]
            want = np.concatenate(ins)
            out = np.empty(n * p, dtype=dtype)
            check(comm.allgather(ins[r], out=out) is out, "returns out")
            same(out, want, "allgather %s n=%d" % (name_of(dtype), n))
            y = np.zeros(n * p, dtype=dtype)
            y[r * n:(r + 1) * n] = ins[r]
            comm.allgather(y)
            same(y, want, "allgather in place %s n=%d" % (name_of(dtype), n))

            # alltoall: block j of rank q's input is gen(q, n, salt=j).
            blocks = [[gen(q, n, dtype, salt=j) for j in range(p)] for q in range(p)]
            mine = np.concatenate(blocks[r]) if n else np.empty(0, dtype)
            want = np.concatenate([blocks[q][r] for q in range(p)]) if n else np.empty(0, dtype)
            out = np.empty(n * p, dtype=dtype)
            comm.alltoall(mine, out=out)
            same(out, want, "alltoall %s n=%d" % (name_of(dtype), n))
            y = mine.copy()
            comm.alltoall(y)
            same(y, want, "alltoall in place %s n=%d" % (name_of(dtype), n))


def test_bcast_reduce(comm):
    p, r = comm.size, comm.rank
    for dtype, ops in DTYPES.items():
        op = ops[1] if len(ops) > 1 else ops[0]
        for root in range(p):
            for n in (0, 1, 9):
                want = gen(root, n, dtype, salt=7)
                buf = want.copy() if r == root else np.zeros(n, dtype=dtype)
                check(comm.bcast(buf, root) is buf, "bcast returns buf")
                same(buf, want, "bcast %s root %d n=%d" % (name_of(dtype), root, n))

                ins = [gen(q, n, dtype, op) for q in range(p)]
                want = reduce_ref(ins, op, dtype)
                out = np.zeros(n, dtype=dtype)
                res = comm.reduce(ins[r], op, root, out=out)
                if r == root:
                    check(res is out, "reduce returns out at the root")
                    same(out, want, "reduce %s %s root %d" % (name_of(dtype), op, root))
                else:
                    check(res is None, "reduce returns None elsewhere")
                y = ins[r].copy()
                res = comm.reduce(y, op=op, root=root)
                if r == root:
                    same(y, want, "reduce in place %s root %d" % (name_of(dtype), root))
                else:
                    same(y, ins[r], "reduce leaves a non-root's buf")


def test_scan_exscan(comm):
    p, r = comm.size, comm.rank
    for dtype, ops in DTYPES.items():
        for op in sorted(set([ops[0], ops[-1]])):
            n = 6
            ins = [gen(q, n, dtype, op) for q in range(p)]
            want = reduce_ref(ins[:r + 1], op, dtype)
            out = np.empty(n, dtype=dtype)
            comm.scan(ins[r], op, out=out)
            same(out, want, "scan %s %s" % (name_of(dtype), op))
            y = ins[r].copy()
            comm.scan(y, op)
            same(y, want, "scan in place %s %s" % (name_of(dtype), op))

            sentinel = np.ones(n, dtype=dtype)
            out = sentinel.copy()
            comm.exscan(ins[r], op, out=out)
            want = reduce_ref(ins[:r], op, dtype) if r > 0 else sentinel
            same(out, want, "exscan %s %s" % (name_of(dtype), op))
            y = ins[r].copy()
            comm.exscan(y, op)
            same(y, want if r > 0 else ins[r], "exscan in place %s %s" % (name_of(dtype), op))


def test_gather_scatter(comm):
    p, r = comm.size, comm.rank
    for dtype in DTYPES:
        for root in range(p):
            n = 3
            ins = [gen(q, n, dtype, salt=root) for q in range(p)]
            full = np.concatenate(ins)
            out = np.zeros(n * p, dtype=dtype) if r == root else None
            res = comm.gather(ins[r], root, out=out)
            if r == root:
                check(res is out, "gather returns out at the root")
                same(out, full, "gather %s root %d" % (name_of(dtype), root))
                y = np.zeros(n * p, dtype=dtype)
                y[r * n:(r + 1) * n] = ins[r]
                comm.gather(y, root)
                same(y, full, "gather in place %s" % name_of(dtype))
            else:
                check(res is None, "gather returns None elsewhere")
                comm.gather(ins[r], root)

            out = np.zeros(n, dtype=dtype)
            send = full.copy() if r == root else None
            check(comm.scatter(send, root, out=out) is out, "scatter returns out")
            same(out, ins[r], "scatter %s root %d" % (name_of(dtype), root))
            if r == root:
                y = full.copy()
                check(comm.scatter(y, root) is y, "scatter in place returns buf")
                same(y, full, "scatter in place leaves the root's input")
            else:
                out = np.zeros(n, dtype=dtype)
                comm.scatter(None, root=root, out=out)
                same(out, ins[r], "scatter %s root %d (again)" % (name_of(dtype), root))


def test_vector(comm):
    p, r = comm.size, comm.rank
    counts = [(q % 3) + 1 for q in range(p)]
    if p > 2:
        counts[2] = 0
    for dtype in DTYPES:
        ins = [gen(q, counts[q], dtype, salt=q) for q in range(p)]
        packed = np.concatenate(ins)
        out = np.zeros(sum(counts), dtype=dtype)
        check(comm.allgatherv(ins[r], counts, out=out) is out, "allgatherv returns out")
        same(out, packed, "allgatherv %s" % name_of(dtype))
        # Displacements with gaps, in reverse rank order.
        displs, at = [0] * p, 0
        for q in reversed(range(p)):
            displs[q] = at
            at += counts[q] + 2
        out = np.zeros(at, dtype=dtype)
        comm.allgatherv(ins[r], counts, out=out, displs=displs)
        want = np.zeros(at, dtype=dtype)
        for q in range(p):
            want[displs[q]:displs[q] + counts[q]] = ins[q]
        same(out, want, "allgatherv displs %s" % name_of(dtype))
        y = np.zeros(at, dtype=dtype)
        y[displs[r]:displs[r] + counts[r]] = ins[r]
        comm.allgatherv(y, counts, displs=displs)
        same(y, want, "allgatherv in place %s" % name_of(dtype))

        # alltoallv: rank q sends (q + j) % 3 items to rank j.
        def sc(q, j):
            return (q + j) % 3

        sendcounts = [sc(r, j) for j in range(p)]
        recvcounts = [sc(j, r) for j in range(p)]
        blocks = {(q, j): gen(q, sc(q, j), dtype, salt=j) for q in range(p) for j in range(p)}
        send = np.concatenate([blocks[(r, j)] for j in range(p)])
        out = np.zeros(sum(recvcounts), dtype=dtype)
        check(comm.alltoallv(send, sendcounts, out, recvcounts) is out, "returns out")
        same(out, np.concatenate([blocks[(j, r)] for j in range(p)]),
             "alltoallv %s" % name_of(dtype))
        # With displacements: every block one item apart, received reversed.
        sdispls = [sum(sendcounts[:j]) + j for j in range(p)]
        send2 = np.zeros(sum(sendcounts) + p, dtype=dtype)
        for j in range(p):
            send2[sdispls[j]:sdispls[j] + sendcounts[j]] = blocks[(r, j)]
        rdispls, at = [0] * p, 0
        for j in reversed(range(p)):
            rdispls[j] = at
            at += recvcounts[j]
        out = np.zeros(at, dtype=dtype)
        comm.alltoallv(send2, sendcounts, out, recvcounts, sdispls=sdispls, rdispls=rdispls)
        want = np.zeros(at, dtype=dtype)
        for j in range(p):
            want[rdispls[j]:rdispls[j] + recvcounts[j]] = blocks[(j, r)]
        same(out, want, "alltoallv displs %s" % name_of(dtype))


def test_p2p(comm):
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    for dtype in DTYPES:
        msg = gen(r, 10, dtype)
        buf = np.zeros(16, dtype=dtype)
        if r % 2 == 0:
            comm.send(msg, right, tag=5)
            st = comm.recv(buf, left, 5)
        else:
            st = comm.recv(buf, source=left, tag=5)
            comm.send(msg, right, 5)
        check(st.source == left and st.tag == 5, "status %r" % (st,))
        check(st.count == 10 and st.bytes == 10 * np.dtype(dtype).itemsize, "status %r" % (st,))
        same(buf[:10], gen(left, 10, dtype), "send/recv %s" % name_of(dtype))
    # sendrecv around the ring; any source, any tag.
    out = np.zeros(4, dtype=np.int64)
    st = comm.sendrecv(np.full(4, r, np.int64), right, out, left, sendtag=r, recvtag=left)
    same(out, np.full(4, left, np.int64), "sendrecv")
    check((st.source, st.tag, st.count) == (left, left, 4), "sendrecv status %r" % (st,))
    st = comm.sendrecv(np.full(4, r, np.int64), right, out, crnet.ANY_SOURCE, sendtag=7)
    check((st.source, st.tag) == (left, 7), "any source %r" % (st,))
    # Messages to oneself, in order, through the nonblocking calls.
    reqs = [comm.isend(np.full(3, k, np.int16), r, tag=k) for k in range(3)]
    bufs = [np.zeros(3, np.int16) for _ in range(3)]
    recvs = [comm.irecv(b, r) for b in bufs]
    sts = crnet.waitall(recvs)
    check(crnet.waitall(reqs) == [None, None, None], "isend results")
    for k in range(3):
        same(bufs[k], np.full(3, k, np.int16), "self message %d" % k)
        check(sts[k].tag == k and sts[k].source == r, "self status %r" % (sts[k],))
    # Too long for the buffer: Truncated, the next message intact.
    comm.send(b"0123456789", r, tag=1)
    comm.send(b"abc", r, tag=1)
    e = raises(crnet.Truncated, lambda: comm.recv(bytearray(4), r, 1), "truncated")
    check(e.code == crnet.ETRUNCATE and "10 bytes" in str(e), str(e))
    b = bytearray(4)
    st = comm.recv(b, r, 1)
    check(bytes(b[:3]) == b"abc" and st.bytes == 3, "after truncation")
    # Cancelled: an irecv no message matched raises Cancelled, its buffer
    # untouched; the message sent after goes to the next receive. A
    # collective's request cannot be cancelled.
    b = bytearray(b"....")
    q = comm.irecv(b, r, tag=5)
    check(q.cancel() is None and not q.done, "cancel returns at once")
    e = raises(crnet.Cancelled, q.wait, "cancelled")
    check(e.code == crnet.ECANCELED and bytes(b) == b"....", str(e))
    check(q.cancel() is None, "cancel of a completed request")
    comm.send(b"wxyz", r, tag=5)
    st = comm.recv(b, r, 5)
    check(bytes(b) == b"wxyz" and st.bytes == 4, "after the cancel")
    q = comm.ibarrier()
    raises(crnet.InvalidArgument, q.cancel, "cancel of a collective")
    q.wait()
    comm.barrier()


def test_nonblocking(comm):
    p, r = comm.size, comm.rank
    n = 1000
    dt = np.float64
    ins = [gen(q, n, dt) for q in range(p)]
    want = reduce_ref(ins, "sum", dt)
    # Several in flight, waited for in reverse order.
    outs = [np.empty(n, dt) for _ in range(4)]
    reqs = [comm.iallreduce(ins[r], out=o) for o in outs]
    for q in reversed(reqs):
        check(q.wait() is not None, "wait result")
        check(q.done and "done" in repr(q), repr(q))
    for o in outs:
        same(o, want, "iallreduce")
    # Every i-call once, completed together.
    x = ins[r].copy()
    rs_out = np.empty(2, dt)
    ag_out = np.empty(2 * p, dt)
    a2a_out = np.empty(2 * p, dt)
    bc = np.arange(5, dtype=dt) if r == 0 else np.zeros(5, dt)
    red = np.zeros(n, dt)
    sc_out, ex_out = np.zeros(n, dt), np.zeros(n, dt)
    g_out = np.zeros(2 * p, dt) if r == 0 else None
    s_out = np.zeros(2, dt)
    av_out = np.zeros(2 * p, dt)
    a2av_out = np.zeros(p, dt)
    reqs = [
        comm.iallreduce(x),
        comm.ireduce_scatter(np.ones(2 * p, dt), out=rs_out),
        comm.iallgather(np.full(2, r, dt), out=ag_out),
        comm.ialltoall(np.arange(2 * p, dtype=dt) + 100 * r, out=a2a_out),
        comm.ibcast(bc, 0),
        comm.ireduce(ins[r], "sum", 0, out=red),
        comm.iscan(ins[r], out=sc_out),
        comm.iexscan(ins[r], out=ex_out),
        comm.ibarrier(),
        comm.igather(np.full(2, r, dt), 0, out=g_out),
        comm.iscatter(np.arange(2 * p, dtype=dt) if r == 0 else None, 0, out=s_out),
        comm.iallgatherv(np.full(2, r, dt), [2] * p, out=av_out),
        comm.ialltoallv(np.full(p, r, dt), [1] * p, a2av_out, [1] * p),
    ]
    results = crnet.waitall(reqs)
    check(results[0] is x and results[8] is None, "waitall results")
    same(x, want, "iallreduce in place")
    same(rs_out, np.full(2, p, dt), "ireduce_scatter")
    same(ag_out, np.repeat(np.arange(p, dtype=dt), 2), "iallgather")
    same(a2a_out, np.concatenate([np.arange(2 * r, 2 * r + 2, dtype=dt) + 100 * q for q in range(p)]), "ialltoall")
    same(bc, np.arange(5, dtype=dt), "ibcast")
    if r == 0:
        same(red, want, "ireduce")
        same(g_out, np.repeat(np.arange(p, dtype=dt), 2), "igather")
    same(sc_out, reduce_ref(ins[:r + 1], "sum", dt), "iscan")
    if r > 0:
        same(ex_out, reduce_ref(ins[:r], "sum", dt), "iexscan")
    same(s_out, np.arange(2 * r, 2 * r + 2, dtype=dt), "iscatter")
    same(av_out, np.repeat(np.arange(p, dtype=dt), 2), "iallgatherv")
    same(a2av_out, np.arange(p, dtype=dt), "ialltoallv")
    # waitany until all are done; test() polling.
    outs = [np.empty(n, dt) for _ in range(3)]
    reqs = [comm.iallreduce(ins[r], out=o) for o in outs]
    seen = set()
    while len(seen) < 3:
        i, res = crnet.waitany(reqs)
        check(i not in seen and res is outs[i], "waitany %d" % i)
        seen.add(i)
    check(crnet.waitany(reqs) == (-1, None), "waitany with nothing in flight")
    for o in outs:
        same(o, want, "waitany results")
    o = np.empty(n, dt)
    q = comm.iallreduce(ins[r], out=o)
    deadline = time.monotonic() + seconds(60)
    while not q.test():
        check(time.monotonic() < deadline, "test() never became true")
    check(q.test() and q.wait() is o, "test then wait")
    same(o, want, "test")
    # Requests keep their buffers: a bytearray being received into cannot
    # be resized; a request dropped in flight completes later (at the
    # latest when its comm closes) and its buffer gets the result.
    ba = bytearray(8)
    q = comm.irecv(ba, r, tag=9)
    raises(BufferError, lambda: ba.extend(b"x"), "resize while in flight")
    comm.send(b"ABCDEFGH", r, tag=9)
    st = q.wait()
    check(bytes(ba) == b"ABCDEFGH" and st.count == 8, "irecv into bytearray")
    ba.extend(b"x")
    d = comm.dup()
    y = ins[r].copy()
    d.iallreduce(y)  # dropped at once
    z = ins[r].copy()
    d.iallreduce(z, out=np.empty_like(z))
    gc.collect()
    q = d.iallreduce(y.copy())
    e = raises(crnet.InvalidArgument, d.close, "close with a live request")
    check("in flight" in str(e), str(e))
    q.wait()
    d.close()
    check(d.closed, "closed")
    same(y, want, "orphan request completed by close()")
    raises(crnet.InvalidArgument, lambda: d.allreduce(y), "call on a closed comm")


def test_buffer_kinds(comm):
    p, r = comm.size, comm.rank
    tri = p * (p - 1) // 2
    a = array.array("i", [r, 2 * r, 3])
    comm.allreduce(a)
    check(list(a) == [tri, 2 * tri, 3 * p], "array.array %r" % (a,))
    a = array.array("d", [r + 0.5])
    comm.allreduce(a, "max")
    check(list(a) == [p - 0.5], "array.array d")
    b = bytearray([r, 1])
    comm.allreduce(b)
    check(list(b) == [tri % 256, p], "bytearray")
    m = memoryview(bytearray(8)).cast("q")
    m[0] = r
    comm.allreduce(m)
    check(m[0] == tri, "memoryview q")
    # A C-contiguous slice of a larger array.
    big = np.zeros(10, np.int32)
    big[2:5] = r
    comm.allreduce(big[2:5])
    same(big, np.array([0, 0] + [tri] * 3 + [0] * 5, np.int32), "slice")
    # Unsigned wraps around as in C.
    u = np.full(2, 255, np.uint8)
    comm.allreduce(u)
    same(u, np.full(2, (255 * p) % 256, np.uint8), "uint8 wraps")
    # Little-endian explicitly is fine on this (little-endian) host.
    le = np.full(3, r, dtype="<i4")
    comm.allreduce(le)
    same(le, np.full(3, tri, dtype="<i4"), "<i4")
    # dtype= reads the bytes as another crnet datatype: bfloat16 from a
    # 16-bit view (the upper half of a float32), 'byte' moved as is.
    f = (np.arange(4, dtype=np.float32) + r)
    bf = (f.view(np.uint32) >> 16).astype(np.uint16)
    comm.allreduce(bf, dtype="bfloat16")
    got = (bf.astype(np.uint32) << 16).view(np.float32)
    same(got, np.arange(4, dtype=np.float32) * p + tri, "bfloat16")
    raw = np.frombuffer(np.full(2, r + 1, np.float16).tobytes(), np.uint8).copy()
    comm.allreduce(raw, dtype=crnet.FLOAT16)
    same(raw.view(np.float16), np.full(2, p * (p + 1) // 2, np.float16), "float16 from bytes")
    recs = bytearray(bytes([r]) * 3)
    out = bytearray(3 * p)
    comm.allgather(recs, out=out, dtype="byte")
    check(bytes(out) == b"".join(bytes([q]) * 3 for q in range(p)), "byte")
    # CPU torch tensors through .numpy() (when torch is there; slow to
    # import, so at p = 2 only).
    if p == 2 and os.environ.get("CRNET_PYTEST_TORCH", "1") == "1":
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            t = torch.full((2, 3), float(r + 1))
            comm.allreduce(t.numpy())
            check(bool((t == 3.0).all()), "torch tensor %r" % (t,))


def test_bad_buffers(comm):
    p, r = comm.size, comm.rank
    f = np.zeros(4 * p, np.float32)
    ro = np.zeros(4 * p, np.float32)
    ro.setflags(write=False)
    cases = [
        (TypeError, lambda: comm.allreduce([1, 2, 3]), "a list"),
        (TypeError, lambda: comm.allreduce(b"abcd"), "read-only in place"),
        (TypeError, lambda: comm.allreduce(f, out=ro), "read-only out"),
        (TypeError, lambda: comm.allreduce(ro), "read-only in place"),
        (ValueError, lambda: comm.allreduce(np.zeros((4, 4), np.float32)[:, 1]), "non-contiguous"),
        (ValueError, lambda: comm.allreduce(np.zeros((4, 4), np.float32, order="F")[:, :3]), "non-contiguous 2-D"),
        (ValueError, lambda: comm.allreduce(np.asfortranarray(np.zeros((3, 4), np.float32))), "Fortran order"),
        (TypeError, lambda: comm.allreduce(f, out=np.zeros(4 * p, np.float64)), "formats differ"),
        (TypeError, lambda: comm.allreduce(f, out=np.zeros(4 * p, np.int32)), "float and int"),
        (ValueError, lambda: comm.allreduce(f, out=np.zeros(4 * p + 1, np.float32)), "sizes differ"),
        (TypeError, lambda: comm.allreduce(np.zeros(3, np.longdouble)), "long double"),
        (TypeError, lambda: comm.allreduce(np.zeros(3, ">i4")), "big-endian"),
        (TypeError, lambda: comm.allreduce(np.zeros(3, "datetime64[s]")), "datetime"),
        (TypeError, lambda: comm.allreduce(np.zeros(3, [("a", "i4"), ("b", "f4")])), "struct"),
        (TypeError, lambda: comm.allreduce(np.zeros(3, bool)), "sum of bools"),
        (TypeError, lambda: comm.allreduce(np.zeros(3, bool), "prod"), "prod of bools"),
        (TypeError, lambda: comm.allreduce(np.zeros(3, np.complex64), "max"), "max of complex"),
        (TypeError, lambda: comm.allreduce(f, "band"), "band of floats"),
        (ValueError, lambda: comm.allreduce(f, "avg"), "unknown op"),
        (ValueError, lambda: comm.allreduce(f, 99), "unknown op constant"),
        (TypeError, lambda: comm.allreduce(f, 1.5), "op of another type"),
        (TypeError, lambda: comm.allreduce(f, "sum", f), "out positional"),
        (TypeError, lambda: comm.allreduce(f, outt=f), "unknown keyword"),
        (TypeError, lambda: comm.allreduce(), "no buffer"),
        (TypeError, lambda: comm.allreduce(crnet.IN_PLACE), "IN_PLACE without out"),
        (ValueError, lambda: comm.allreduce(np.zeros(3, np.uint8), dtype="float32"), "dtype size"),
        (ValueError, lambda: comm.allreduce(f, dtype="complex"), "unknown dtype"),
        (ValueError, lambda: comm.reduce_scatter(f, out=np.zeros(5, np.float32)), "reduce_scatter sizes"),
        (ValueError, lambda: comm.reduce_scatter(f, counts=[1] * (p + 1)), "counts length"),
        (ValueError, lambda: comm.reduce_scatter(f, counts=[-1] + [1] * (p - 1)), "negative count"),
        (ValueError, lambda: comm.reduce_scatter(f, counts=[1] * p), "counts total"),
        (TypeError, lambda: comm.reduce_scatter(f, counts=5), "counts not a sequence"),
        (ValueError, lambda: comm.allgather(np.zeros(2, np.float32), out=np.zeros(2 * p + 1, np.float32)), "allgather sizes"),
        (ValueError, lambda: comm.alltoall(np.zeros(p, np.float32), out=np.zeros(p + 1, np.float32)), "alltoall sizes"),
        (ValueError, lambda: comm.bcast(f, root=p), "root out of range"),
        (ValueError, lambda: comm.bcast(f, root=-1), "negative root"),
        (TypeError, lambda: comm.bcast(f, root="0"), "root of another type"),
        (ValueError, lambda: comm.allgatherv(np.zeros(2, np.float32), [1] * p, out=np.zeros(p, np.float32)), "allgatherv count"),
        (ValueError, lambda: comm.allgatherv(np.zeros(1, np.float32), [1] * p, out=np.zeros(p - 1, np.float32)), "allgatherv extent"),
        (ValueError, lambda: comm.alltoallv(f, [4] * p, np.zeros(4 * p - 1, np.float32), [4] * p), "alltoallv extent"),
        (ValueError, lambda: comm.alltoallv(f, [4] * p, np.zeros(4 * p, np.float32), [4] * p, sdispls=[4 * p - 3] * p), "alltoallv sdispls"),
        (TypeError, lambda: comm.alltoallv(crnet.IN_PLACE, [4] * p, f, [4] * p), "alltoallv in place"),
        (ValueError, lambda: comm.send(f, p), "dest out of range"),
        (ValueError, lambda: comm.send(f, 0, tag=-1), "negative tag"),
        (ValueError, lambda: comm.recv(f, source=p), "source out of range"),
        (TypeError, lambda: comm.recv(b"xx", 0), "read-only receive"),
        (TypeError, lambda: crnet.waitall([1]), "waitall of an int"),
        (ValueError, lambda: comm.split(-5), "negative color"),
        (ValueError, lambda: comm.set_schedule("allreduce", "no-such-schedule"), "unknown schedule"),
        (ValueError, lambda: comm.set_schedule("nocoll", "auto"), "unknown collective"),
    ]
    if p > 1:
        cases.append((ValueError, lambda: comm.reduce_scatter(np.zeros(4 * p + 1, np.float32)),
                      "reduce_scatter in place, not a multiple of p"))
    # The checks that depend on being the root or not.
    if r == 0:
        cases += [
            (ValueError, lambda: comm.gather(np.zeros(2, np.float32), 0, out=np.zeros(2 * p + 2, np.float32)), "gather sizes"),
            (ValueError, lambda: comm.scatter(np.zeros(2 * p + 1, np.float32), 0, out=np.zeros(2, np.float32)), "scatter sizes"),
            (TypeError, lambda: comm.scatter([0.0] * p, 0), "scatter of a list"),
        ]
    else:
        cases += [
            (TypeError, lambda: comm.scatter(None, 0), "scatter without out"),
        ]
    for exc, fn, what in cases:
        e = raises(exc, fn, what)
        if isinstance(e, crnet.Error):
            check(e.errmsg != "" and e.code == crnet.EINVAL, "%s: %r" % (what, e))
    # Nothing was sent: the ranks are still in step.
    x = np.full(3, r, np.int64)
    comm.allreduce(x)
    same(x, np.full(3, p * (p - 1) // 2, np.int64), "in step after refused calls")
    check(comm.errmsg is not None, "errmsg")


def test_subcomms(comm):
    p, r = comm.size, comm.rank
    # Split by parity, numbered in reverse (key = -rank).
    sub = comm.split(r % 2, key=-r)
    members = [q for q in range(p) if q % 2 == r % 2]
    check(sub.size == len(members) and not sub.is_world, "split size")
    check(sub.rank == sorted(members, reverse=True).index(r), "split rank %d" % sub.rank)
    x = np.array([r, 1], np.int64)
    sub.allreduce(x)
    same(x, np.array([sum(members), len(members)], np.int64), "allreduce on a split")
    rows = np.zeros(sub.size, np.int32)
    sub.allgather(np.array([r], np.int32), out=rows)
    same(rows, np.array(sorted(members, reverse=True), np.int32), "allgather on a split")
    # Ranks that pass UNDEFINED (or None) get None.
    half = comm.split(0 if r < (p + 1) // 2 else crnet.UNDEFINED)
    check((half is None) == (r >= (p + 1) // 2), "UNDEFINED gives None")
    none = comm.split(None)
    check(none is None, "color None")
    dup = sub.dup()
    check(dup.size == sub.size and dup.rank == sub.rank, "dup")
    y = np.array([1.0])
    dup.allreduce(y)
    check(y[0] == sub.size, "allreduce on a dup")
    check(dup.last_schedule("allgather") is None, "no allgather yet")
    check(dup.last_schedule("allreduce") not in (None, "auto"),
          "auto's pick %r" % (dup.last_schedule("allreduce"),))
    dup.set_schedule("allreduce", "ring")
    dup.set_schedule(crnet.COLL_ALLGATHER, "auto")
    dup.allreduce(y)
    check(y[0] == sub.size ** 2, "allreduce on a ring")
    check(dup.last_schedule(crnet.COLL_ALLREDUCE) == "ring", "ring ran")
    st = dup.coll_stats("allreduce")
    check(st["calls"] == 2, "coll_stats %r" % (st,))
    dup.stats_reset()
    check(dup.coll_stats(crnet.COLL_ALLREDUCE)["calls"] == 0, "stats_reset")
    if p > 1:
        check(isinstance(comm.peer_stats((r + 1) % p)["bytes_sent"], int), "peer_stats")
    # The world goes last: refused while derived comms are open.
    e = raises(crnet.InvalidArgument, comm.close, "world before its sub-comms")
    check("still open" in str(e), str(e))
    check(not comm.closed, "the world stays open")
    with dup:
        dup.barrier()
    check(dup.closed, "with closes")
    sub.close()
    sub.close()  # twice: nothing
    if half is not None:
        half.barrier()
    # Dropped derived comms are destroyed by the garbage collector.
    del half, sub, dup
    gc.collect()
    # A comm in a reference cycle: close() of the world collects it.
    cyc = [comm.dup()]
    cyc.append(cyc)
    del cyc
    comm.barrier()


def thread_asleep(tid, seconds):
    """Whether thread tid of this process is seen asleep ('S' in its
    /proc stat) twice, 20 ms apart, within `seconds`: blocked in a call,
    not waiting for the GIL (this thread lets it go while it sleeps)."""
    until = time.monotonic() + seconds
    seen = 0
    while time.monotonic() < until:
        try:
            with open("/proc/self/task/%d/stat" % tid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        seen = seen + 1 if state == "S" else 0
        if seen == 2:
            return True
        time.sleep(0.02)
    return False


def test_gil_released(comm):
    p, r = comm.size, comm.rank
    stamps = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            stamps.append(time.monotonic())
            for _ in range(2000):
                pass

    # A blocking receive whose message another Python thread sends later,
    # once the receiving thread is asleep in it: without the GIL released,
    # the sender could never run (the test would time out). In a job of
    # one too, where the wait has no link to sleep on and sleeps until the
    # other thread's call kicks it.
    got = bytearray(4)
    receiver = threading.get_native_id()
    entering = threading.Event()
    asleep = []

    def later():
        entering.wait(30)
        asleep.append(thread_asleep(receiver, 30))
        comm.send(b"late", r, tag=77)

    t = threading.Thread(target=later)
    t.start()
    entering.set()
    st = comm.recv(got, r, 77)
    t.join()
    check(asleep == [True], "the receiving thread was seen asleep in recv")
    check(bytes(got) == b"late" and st.tag == 77, "recv from a thread")
    # A long allreduce (rank 0 enters it a second late): another thread
    # keeps running meanwhile on the ranks that wait in it.
    th = threading.Thread(target=spin, daemon=True)
    th.start()
    comm.barrier()  # rank 0's second late counts from here on every rank
    if r == 0:
        time.sleep(1.0)
    x = np.ones(1 << 16, np.float32)
    t0 = time.monotonic()
    comm.allreduce(x)
    t1 = time.monotonic()
    stop.set()
    th.join()
    same(x[:4], np.full(4, p, np.float32), "allreduce result")
    if r != 0 and p > 1:
        inside = [s for s in stamps if t0 + 0.2 < s < t1 - 0.05]
        check(t1 - t0 > 0.5, "the allreduce waited %.3f s" % (t1 - t0))
        check(len(inside) >= 5, "another thread ran only %d times in %.3f s of allreduce"
              % (len(inside), t1 - t0))
    # A wait releases the GIL too.
    stamps.clear()
    stop.clear()
    th = threading.Thread(target=spin, daemon=True)
    th.start()
    comm.barrier()
    if r == 0:
        time.sleep(0.6)
    q = comm.iallreduce(np.ones(8, np.float32))
    t0 = time.monotonic()
    q.wait()
    t1 = time.monotonic()
    stop.set()
    th.join()
    if r != 0 and p > 1:
        inside = [s for s in stamps if t0 + 0.1 < s < t1 - 0.05]
        check(len(inside) >= 3, "another thread ran only %d times during wait()" % len(inside))


def test_threads(comm):
    """Python threads, each on a comm of its own, calling at once: crnet
    runs their calls side by side (the GIL is released in each)."""
    p, r = comm.size, comm.rank
    comms = [comm.dup() for _ in range(3)]
    errors = []

    def work(k, c):
        try:
            for i in range(40):
                x = np.full(100 + k, r + i, np.int64)
                q = c.iallreduce(x) if i % 2 else None
                if q is None:
                    c.allreduce(x)
                else:
                    q.wait()
                want = p * i + p * (p - 1) // 2
                if not (x == want).all():
                    errors.append("thread %d call %d: %r != %d" % (k, i, x[:3], want))
        except Exception as e:  # reported below, on this rank
            errors.append("thread %d: %r" % (k, e))

    threads = [threading.Thread(target=work, args=(k, c)) for k, c in enumerate(comms)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    check(not any(t.is_alive() for t in threads), "a thread is stuck")
    check(not errors, "; ".join(errors))
    for c in comms:
        c.close()


TESTS = [
    test_basics,
    test_allreduce,
    test_reduce_scatter,
    test_allgather_alltoall,
    test_bcast_reduce,
    test_scan_exscan,
    test_gather_scatter,
    test_vector,
    test_p2p,
    test_nonblocking,
    test_buffer_kinds,
    test_bad_buffers,
    test_subcomms,
    test_threads,
    test_gil_released,
]


def main():
    only = set(sys.argv[1:])
    comm = crnet.Comm()
    for t in TESTS:
        if only and t.__name__ not in only:
            continue
        t0 = time.monotonic()
        try:
            t(comm)
        except BaseException:
            sys.stdout.flush()
            sys.stderr.write("rank %d of %d: %s FAILED\n" % (comm.rank, comm.size, t.__name__))
            traceback.print_exc()
            sys.stderr.flush()
            comm.abort(1)
            os._exit(1)
        if comm.rank == 0:
            print("ok %s (%.2f s)" % (t.__name__, time.monotonic() - t0), flush=True)
    comm.close()
    if comm.rank == 0:
        print("test_api: all passed at p = %d" % comm.size)


if __name__ == "__main__":
    main()
