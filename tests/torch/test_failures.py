"""Jobs that go wrong on purpose, through the crnet backend: every failure
must become a RuntimeError carrying crnet's error and message, on every
rank concerned, within a bounded time; nothing may hang.

The script starts its own ranks (without crlaunch, which would stop the
survivors as soon as one rank fails): each scenario runs P processes of
this interpreter with crnet's environment (rank 0 serves the rendezvous),
each prints one RESULT line, and the driver checks them.

  lost     p = 3: rank 2 dies (os._exit) after init, once rank 0 waits on
           a future of an allreduce and rank 1 is about to make a blocking
           one (each says so in a file): both raise CRNET_EPEER naming
           rank 2, within LOST_S; rank 0's Work is complete and not
           successful.
  timeout  p = 2, init_process_group(timeout=2 s): rank 1 joins an
           allreduce only once rank 0 has timed out (a file says so);
           rank 0 raises CRNET_ETIMEDOUT after about 2 s, and rank 1 ends.
  mismatch p = 2: rank 0 calls allreduce, rank 1 broadcast: both raise
           CRNET_EMISMATCH.
  raise    p = 2: rank 1 ends with an uncaught exception once rank 0
           is in an allreduce with it (a file says so): crnet_torch aborts
           the job at exit, rank 0 raises CRNET_EABORTED within LOST_S.
  ranks    p = 2: torch is given the other rank (a FileStore, swapped
           ranks): init raises on both, naming both numberings.

    /usr/bin/python3 tests/torch/test_failures.py
"""
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

LOST_S = 5.0  # crnet's own bound is 2 s; ranks share two cores here


def result(**kw):
    print("RESULT " + json.dumps(kw), flush=True)


def signal_file(name):
    """Tells the scenario's other ranks something: a file next to the
    store (TEST_STORE)."""
    with open(os.environ["TEST_STORE"] + "." + name, "w"):
        pass


def await_file(name, seconds=30):
    """Waits for another rank's signal_file(name); without it after
    `seconds`, the rank ends saying so (nothing hangs)."""
    path = os.environ["TEST_STORE"] + "." + name
    until = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > until:
            result(error=f"test: no signal {name!r} within {seconds} s")
            sys.exit(4)
        time.sleep(0.001)


def rank_main(scenario):
    import datetime
    from torchtest import torch, dist
    r = int(os.environ["CRNET_RANK"])
    if scenario == "ranks":
        store = dist.FileStore(os.environ["TEST_STORE"], 2)
        try:
            dist.init_process_group("crnet", store=store, rank=1 - r,
                                    world_size=2)
            result(error=None)
        except RuntimeError as e:
            result(error=str(e))
        return
    timeout = datetime.timedelta(seconds=2 if scenario == "timeout" else 60)
    dist.init_process_group("crnet", timeout=timeout)
    t = torch.ones(1000)
    dist.all_reduce(t)          # everyone is there
    if scenario == "lost":
        if r == 2:
            # Once rank 0's call is in flight and rank 1 is about to make
            # its own (neither can complete without this rank).
            await_file("lost.0")
            await_file("lost.1")
            os._exit(3)
        t0 = time.monotonic()
        try:
            work = None
            if r == 0:
                work = dist.all_reduce(t, async_op=True)
                signal_file("lost.0")
                work.get_future().wait()
            else:
                signal_file("lost.1")
                dist.all_reduce(t)
            result(error=None)
        except RuntimeError as e:
            # The Work of the failed call says so too.
            state = None if work is None else [work.is_completed(),
                                               work.is_success()]
            result(error=str(e), seconds=time.monotonic() - t0, work=state)
    elif scenario == "timeout":
        if r == 1:
            await_file("timeout.0")
        t0 = time.monotonic()
        try:
            dist.all_reduce(t)
            result(error=None)
        except RuntimeError as e:
            result(error=str(e), seconds=time.monotonic() - t0)
        if r == 0:
            signal_file("timeout.0")
    elif scenario == "raise":
        if r == 1:
            # Only once rank 0 is done with the allreduce above (the abort
            # fails calls complete on one side only, too) and about to
            # make the next, which cannot complete without this rank.
            await_file("raise.0")
            raise KeyError("an uncaught exception on rank 1")
        t0 = time.monotonic()
        try:
            signal_file("raise.0")
            dist.all_reduce(t)
            result(error=None)
        except RuntimeError as e:
            result(error=str(e), seconds=time.monotonic() - t0)
    elif scenario == "mismatch":
        try:
            if r == 0:
                dist.all_reduce(t)
            else:
                dist.broadcast(t, src=0)
            result(error=None)
        except RuntimeError as e:
            result(error=str(e))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(scenario, p, tmp):
    env = dict(os.environ)
    env.update({"CRNET_SIZE": str(p),
                "CRNET_RENDEZVOUS": f"127.0.0.1:{free_port()}",
                "CRNET_JOB_KEY": secrets.token_hex(32),
                "CRNET_INIT_TIMEOUT": "60",
                "TEST_STORE": os.path.join(tmp, scenario + ".store")})
    env.pop("CRNET_TIMEOUT", None)
    procs = []
    for r in range(p):
        env["CRNET_RANK"] = str(r)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--rank", scenario],
            env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True))
    out = []
    # Each scenario takes a few seconds (half a minute under ASan); five
    # of them at this bound stay inside the test's meson timeout.
    deadline = time.monotonic() + 50
    for pr in procs:
        try:
            text, _ = pr.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            text, _ = pr.communicate()
            text += "\n(killed: the scenario hung)"
        res = None
        for line in text.splitlines():
            if line.startswith("RESULT "):
                res = json.loads(line[7:])
        out.append((pr.returncode, res, text))
    return out


def main():
    failed = 0

    def check(cond, what, text=""):
        nonlocal failed
        if not cond:
            failed += 1
            print(f"FAIL: {what}\n{text}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        res = run("lost", 3, tmp)
        for r in (0, 1):
            code, got, text = res[r]
            err = (got or {}).get("error") or ""
            # The lost rank is named, not just any "2" in the text.
            check("CRNET_EPEER" in err and re.search(r"\brank 2\b", err),
                  f"lost: rank {r} raised {err!r}", text)
            if got and got.get("seconds") is not None:
                check(got["seconds"] < LOST_S,
                      f"lost: rank {r} took {got['seconds']:.2f} s", text)
                print(f"lost: rank {r} after {got['seconds']:.2f} s: {err}")
        check(res[0][1] is not None and res[0][1].get("work") == [True, False],
              f"lost: rank 0's Work (completed, success): "
              f"{(res[0][1] or {}).get('work')}", res[0][2])
        check(res[2][0] == 3, f"lost: rank 2 exited {res[2][0]}", res[2][2])

        res = run("timeout", 2, tmp)
        code, got, text = res[0]
        err = (got or {}).get("error") or ""
        secs = (got or {}).get("seconds") or 0
        check("CRNET_ETIMEDOUT" in err, f"timeout: rank 0 raised {err!r}",
              text)
        check(1.5 <= secs < 6, f"timeout: rank 0 after {secs:.2f} s", text)
        print(f"timeout: rank 0 after {secs:.2f} s: {err}")
        # Rank 1 comes late: its allreduce may still succeed (rank 0's
        # part had reached it before rank 0 gave up) or fail; it must end.
        code, got, text = res[1]
        err = (got or {}).get("error") or ""
        check(got is not None and (not err or err.startswith("crnet")),
              f"timeout: rank 1 ended with {got}", text)

        res = run("mismatch", 2, tmp)
        for r in (0, 1):
            code, got, text = res[r]
            err = (got or {}).get("error") or ""
            check("CRNET_EMISMATCH" in err, f"mismatch: rank {r} raised {err!r}",
                  text)
            print(f"mismatch: rank {r}: {err}")

        res = run("raise", 2, tmp)
        code, got, text = res[0]
        err = (got or {}).get("error") or ""
        secs = (got or {}).get("seconds") or 0
        check("CRNET_EABORTED" in err and "rank 1" in err,
              f"raise: rank 0 raised {err!r}", text)
        check(secs < LOST_S, f"raise: rank 0 after {secs:.2f} s", text)
        check(res[1][0] != 0 and "KeyError" in res[1][2],
              f"raise: rank 1 exited {res[1][0]}", res[1][2])
        print(f"raise: rank 0 after {secs:.2f} s: {err}")

        res = run("ranks", 2, tmp)
        for r in (0, 1):
            code, got, text = res[r]
            err = (got or {}).get("error") or ""
            check(f"torch's rank {1 - r} of 2 is not crnet's rank {r} of 2"
                  in err, f"ranks: rank {r} raised {err!r}", text)
        print(f"ranks: rank 0: {res[0][1]}")
        for r in (0, 1):
            check(res[r][0] == 0, f"ranks: rank {r} exited {res[r][0]}",
                  res[r][2])

    print(f"test_failures: {'FAILED' if failed else 'passed'}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--rank":
        rank_main(sys.argv[2])
    else:
        import faulthandler
        from torchtest import need_torch
        need_torch()
        # The scenarios have deadlines of their own (run()).
        faulthandler.cancel_dump_traceback_later()
        main()
