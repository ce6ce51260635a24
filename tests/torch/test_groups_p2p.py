"""new_group over crnet sub-communicators, and point-to-point messages.

Groups: the even and the odd ranks, the two ends given in reverse order
(torch sorts them), a group of one, all ranks, a Gloo group beside them;
members compute on their group, non-members get no group (-1 as rank),
calls on several groups are in flight at once, a group is destroyed and
the others go on. Messages: a ring with isend/irecv (small: eager; large:
rendezvous), blocking pairs, tags received out of order, recv from any
source, every dtype as bytes, messages on a sub-group, a receive too small
(CRNET_ETRUNCATE, the next message intact), Work.wait with a timeout, and
Work.wait inside a future's then().

    crlaunch -n 4 /usr/bin/python3 tests/torch/test_groups_p2p.py
"""
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchtest import Checks, data, torch, dist  # noqa: E402


def groups(c, r, p):
    evens = list(range(0, p, 2))
    odds = list(range(1, p, 2))
    g_even = dist.new_group(evens)
    g_odd = dist.new_group(odds)
    g_ends = dist.new_group([p - 1, 0])
    g_one = dist.new_group([1 % p])
    g_all = dist.new_group(timeout=datetime.timedelta(seconds=120))
    g_gloo = dist.new_group(backend="gloo")
    ends = sorted({0, p - 1})

    for g, members in [(g_even, evens), (g_odd, odds), (g_ends, ends),
                       (g_one, [1 % p]), (g_all, list(range(p)))]:
        want = members.index(r) if r in members else -1
        c.ok(dist.get_rank(g) == want,
             f"rank in group {members}: {dist.get_rank(g)}, want {want}")
        if r in members:
            c.ok(dist.get_world_size(g) == len(members),
                 f"size of group {members}")
            c.ok(dist.get_backend(g) == "crnet", "a crnet group")

    # One call per group, all in flight at once, waited for in reverse.
    works = []
    for g, members in [(g_even, evens), (g_odd, odds), (g_ends, ends),
                       (g_one, [1 % p]), (g_all, list(range(p))),
                       (None, list(range(p)))]:
        if r not in members:
            continue
        t = torch.full((1000,), float(r + 1), dtype=torch.float64)
        works.append((t, dist.all_reduce(t, group=g, async_op=True),
                      float(sum(k + 1 for k in members)), members))
    for t, w, want, members in reversed(works):
        w.wait()
        c.ok(bool((t == want).all()), f"allreduce on group {members}")

    # Roots are global ranks; torch maps them to the group's.
    if r in ends:
        t = torch.full((3,), float(r), dtype=torch.float32)
        dist.broadcast(t, src=p - 1, group=g_ends)
        c.ok(bool((t == p - 1).all()), "broadcast from the last rank on ends")
    if r in odds:
        out = [torch.empty(2, dtype=torch.int64) for _ in odds]
        dist.all_gather(out, torch.tensor([r, 7 * r]), group=g_odd)
        c.ok([o.tolist() for o in out] == [[k, 7 * k] for k in odds],
             "all_gather on the odd ranks")
        out = torch.empty(1, dtype=torch.int64)
        dist.reduce_scatter(out, [torch.tensor([r * 10 + j])
                                  for j in range(len(odds))], group=g_odd)
        j = odds.index(r)
        c.ok(out.item() == sum(k * 10 + j for k in odds),
             "reduce_scatter on the odd ranks")
    # The same numbers from Gloo, the anchor, in the same job.
    t1 = data(r, 99, 4096, torch.float32)
    t2 = t1.clone()
    dist.all_reduce(t1)
    dist.all_reduce(t2, group=g_gloo)
    c.ok(torch.equal(t1, t2), "crnet and gloo agree (small integers)")

    if r in evens:
        dist.destroy_process_group(g_even)
    t = torch.ones(4)
    dist.all_reduce(t, group=g_all)
    c.ok(bool((t == p).all()), "the other groups go on after a destroy")


def messages(c, r, p):
    if p < 2:
        return
    nxt, prv = (r + 1) % p, (r - 1) % p
    # A ring: each message small (eager) and large (rendezvous, > 64 KiB).
    for n in [10, 300_000]:
        src = data(r, 7, n, torch.float32)
        got = torch.empty(n)
        rq = dist.irecv(got, src=prv, tag=3)
        sq = dist.isend(src, dst=nxt, tag=3)
        sq.wait()
        rq.wait()
        c.equal(got, data(prv, 7, n, torch.float32), f"ring n={n}")
    # The same ring through batch_isend_irecv.
    got = torch.empty(6, dtype=torch.int64)
    ops = [dist.P2POp(dist.isend, torch.full((6,), r, dtype=torch.int64), nxt),
           dist.P2POp(dist.irecv, got, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    c.ok(got.tolist() == [prv] * 6, f"batch_isend_irecv: {got.tolist()}")
    # Blocking pairs (0,1), (2,3), ...; every dtype travels as bytes.
    partner = r ^ 1
    if partner < p:
        for dtype in [torch.bool, torch.complex128, torch.bfloat16, torch.int8]:
            mine = data(r, 11, 33, dtype)
            got = torch.empty(33, dtype=dtype)
            if r % 2 == 0:
                dist.send(mine, partner)
                dist.recv(got, partner)
            else:
                dist.recv(got, partner)
                dist.send(mine, partner)
            c.equal(got, data(partner, 11, 33, dtype), f"pair {dtype}")
    # Tags: two messages received in the other order.
    if r == 0:
        dist.send(torch.tensor([5.0]), 1, tag=5)
        dist.send(torch.tensor([7.0]), 1, tag=7)
    elif r == 1:
        a, b = torch.empty(1), torch.empty(1)
        dist.recv(a, 0, tag=7)
        dist.recv(b, 0, tag=5)
        c.ok(a.item() == 7.0 and b.item() == 5.0, "tags out of order")
    # From any source: rank 0 hears from everyone, in any order.
    if r == 0:
        seen = set()
        for _ in range(p - 1):
            t = torch.empty(2, dtype=torch.int32)
            who = dist.recv(t)
            c.ok(t.tolist() == [who, who * who], f"any source: {who} {t}")
            seen.add(who)
        c.ok(seen == set(range(1, p)), f"any source: heard {sorted(seen)}")
    else:
        dist.send(torch.tensor([r, r * r], dtype=torch.int32), 0)
    # On a sub-group (ranks 1 .. p-1), ranks named globally.
    g = dist.new_group(list(range(1, p)))
    if r >= 1 and p >= 3:
        if r == 1:
            dist.send(torch.tensor([42.0]), dst=2, group=g)
        elif r == 2:
            t = torch.empty(1)
            dist.recv(t, src=1, group=g)
            c.ok(t.item() == 42.0, "message on a sub-group")
    # A receive too small: CRNET_ETRUNCATE, the message dropped, the next
    # one intact. A receive too large: refused by the backend.
    if r == 1:
        dist.send(torch.arange(10.0), 0, tag=9)
        dist.send(torch.arange(5.0), 0, tag=9)
        dist.send(torch.arange(3.0), 0, tag=9)
    elif r == 0:
        small = torch.empty(5)
        c.raises(lambda: dist.recv(small, 1, tag=9), ["CRNET_ETRUNCATE"],
                 "receive too small")
        dist.recv(small, 1, tag=9)
        c.equal(small, torch.arange(5.0), "the message after a truncation")
        c.raises(lambda: dist.recv(torch.empty(5), 1, tag=9),
                 ["received 12 bytes", "20"], "receive too large")
    # Work.wait with a timeout: the progress thread completes the receive.
    if r == 0:
        t = torch.empty(1)
        w = dist.irecv(t, src=1, tag=12)
        c.raises(lambda: w.wait(timeout=datetime.timedelta(milliseconds=200)),
                 ["timed out"], "Work.wait times out")
        dist.send(torch.ones(1), 1, tag=11)
        c.ok(w.wait(timeout=datetime.timedelta(seconds=60)),
             "Work.wait(timeout) completes")
        c.ok(t.item() == 2.0, "the late message")
    elif r == 1:
        dist.recv(torch.empty(1), 0, tag=11)
        time.sleep(0.05)
        dist.send(torch.full((1,), 2.0), 0, tag=12)
    # Waits inside a completion callback (a future's then()): on its own
    # Work, it returns; on a call that is not complete, it raises instead
    # of hanging crnet's thread. Rank 1 sends what completes the Work only
    # once rank 0 has attached the callback (the "go" message), so that
    # the callback runs in crnet's completion, not in then() itself.
    if r == 0:
        w = dist.irecv(torch.empty(1), src=1, tag=80)
        f = w.get_future().then(lambda _: w.wait())
        dist.send(torch.ones(1), 1, tag=79)
        c.ok(f.wait() is True, "Work.wait on its own Work in then()")
        late = dist.irecv(torch.empty(1), src=1, tag=77)
        w = dist.irecv(torch.empty(1), src=1, tag=78)
        f = w.get_future().then(lambda _: late.wait())
        dist.send(torch.ones(1), 1, tag=79)
        c.raises(f.wait, ["completion callback"],
                 "Work.wait in then() on a call not complete")
        dist.barrier()
        late.wait()
    else:
        if r == 1:
            for tag in (80, 78):
                dist.recv(torch.empty(1), 0, tag=79)
                dist.send(torch.ones(1), 0, tag=tag)
        dist.barrier()
        if r == 1:
            dist.send(torch.ones(1), 0, tag=77)
    dist.barrier()


def main():
    dist.init_process_group("crnet")
    c = Checks("test_groups_p2p")
    r, p = dist.get_rank(), dist.get_world_size()
    groups(c, r, p)
    messages(c, r, p)
    c.finish()


if __name__ == "__main__":
    main()
