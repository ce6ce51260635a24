"""Starts through torch's store (env://, tests/torch/envrun.py) that go
wrong, and the job key rank 0 publishes there: every failure must become a
RuntimeError that says what happened, within a bounded time; the key must
never be printed.

  key       p = 2, test_env.py with crnet's and torch's debug logs on
            (CRNET_DEBUG, TORCH_DISTRIBUTED_DEBUG=DETAIL,
            TORCH_CPP_LOG_LEVEL=INFO): it passes, rank 0 writes the key it
            reads from the store to a file, and no rank's output holds it.
  dies      p = 3: rank 2 joins torch's store and dies before the backend
            starts; ranks 0 and 1 raise CRNET_ETIMEDOUT naming rank 2
            after the init timeout (torch's timeout, 3 s), not later.
  late      p = 2: rank 0 serves torch's store but never makes the group;
            rank 1 raises CRNET_ETIMEDOUT saying it waited for rank 0's
            crnet.key, after torch's timeout (3 s).
  gone      p = 2: rank 0 serves torch's store and exits once rank 1 has
            joined it; rank 1 raises CRNET_EIO at once (well before
            torch's 60-s timeout), naming torch's store.
  lost      p = 2, a job started through the store: rank 1 dies after an
            allreduce; rank 0's next one raises CRNET_EPEER naming rank 1
            at once (as under crlaunch: the store plays no part after the
            start).

The ranks make torch's store themselves, as env:// would, and hand it to
init_process_group (store=), so that the times are the backend's alone
and not the wait of torch's store for slow ranks. In every scenario no
output holds 64 hex digits in a row (a key's form). The bounds stretch
with CRNET_TEST_TIME_SCALE (the sanitizer pass).

In every scenario no output holds 64 hex digits in a row (a key's form).

    /usr/bin/python3 tests/torch/test_env_failures.py [scenario...]
"""
import datetime
import json
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import envrun  # noqa: E402

SCALE = float(os.environ.get("CRNET_TEST_TIME_SCALE") or 1)
TIMEOUT_S = 3.0
# The init timeout is TIMEOUT_S; ranks share two cores, so the error may
# come a little later, never much.
LATE_S = TIMEOUT_S + 2.0 * SCALE


def result(**kw):
    print("RESULT " + json.dumps(kw), flush=True)


def signal_file(name):
    with open(os.environ["TEST_DIR"] + "/" + name, "w"):
        pass


def await_file(name, seconds=60):
    path = os.environ["TEST_DIR"] + "/" + name
    until = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > until:
            result(error=f"test: no signal {name!r} within {seconds} s")
            sys.exit(4)
        time.sleep(0.01)


def own_store(p, master):
    """torch's env:// store, made by this rank itself (as env:// would) so
    that the rank can stop before the backend starts."""
    from torchtest import dist
    return dist.TCPStore(os.environ["MASTER_ADDR"],
                         int(os.environ["MASTER_PORT"]), p, master,
                         datetime.timedelta(seconds=60))


def rank_main(scenario):
    from torchtest import dist
    r = int(os.environ["RANK"])
    p = int(os.environ["WORLD_SIZE"])
    if scenario == "dies" and r == 2:
        own_store(p, False)     # counted by rank 0's store: it goes on
        os._exit(3)
    if scenario in ("late", "gone") and r == 0:
        store = own_store(p, True)  # waits until rank 1 has joined it
        if scenario == "gone":
            # Once rank 1 is about to wait in the store for the key.
            await_file("gone.joined")
            time.sleep(0.5)
            os._exit(3)
        await_file("late.done")
        del store
        return
    kw = dict(store=own_store(p, r == 0), rank=r, world_size=p)
    if scenario == "gone":
        signal_file("gone.joined")
    timeout = datetime.timedelta(
        seconds=TIMEOUT_S if scenario in ("dies", "late") else 60)
    t0 = time.monotonic()
    try:
        dist.init_process_group("crnet", timeout=timeout, **kw)
        if scenario == "lost":
            import torch
            t = torch.ones(100)
            dist.all_reduce(t)
            if r == 1:
                os._exit(3)
            t0 = time.monotonic()
            dist.all_reduce(t)
        result(error=None)
    except RuntimeError as e:
        result(error=str(e), seconds=time.monotonic() - t0)
    if scenario == "late":
        signal_file("late.done")
    os._exit(0)  # the job never started: nothing to leave


def run(scenario, p, tmp, script=None, extra=None):
    env = {"TEST_DIR": tmp, "CRNET_INIT_TIMEOUT": None}
    env.update(extra or {})
    argv = [sys.executable, script or os.path.abspath(__file__)]
    if script is None:
        argv += ["--rank", scenario]
    procs = envrun.start(p, argv, extra=env, capture=True)
    # Mostly torch's import in each rank, all scenarios' ranks at once:
    # 10-20 s here, a minute under ASan; inside meson's timeout.
    codes, outs, killed = envrun.finish(procs, 90 * SCALE)
    res = []
    for code, text in zip(codes, outs):
        got = None
        for line in text.splitlines():
            if line.startswith("RESULT "):
                got = json.loads(line[7:])
        res.append((code, got, text + ("\n(killed: hung)" if killed else "")))
    return res


def main(only):
    failed = 0

    def want(name):
        return not only or name in only

    def check(cond, what, text=""):
        nonlocal failed
        if not cond:
            failed += 1
            print(f"FAIL: {what}\n{text}", flush=True)

    def no_key_form(name, res):
        for r, (_, _, text) in enumerate(res):
            check(not re.search(r"[0-9a-fA-F]{64}", text),
                  f"{name}: rank {r} printed 64 hex digits", text)

    test_env = os.path.join(HERE, "test_env.py")
    with tempfile.TemporaryDirectory() as tmp:
        key_out = os.path.join(tmp, "key")
        jobs = {"key": (2, test_env, {"TEST_KEY_OUT": key_out,
                                      "CRNET_DEBUG": "1",
                                      "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
                                      "TORCH_CPP_LOG_LEVEL": "INFO"}),
                "dies": (3, None, None), "late": (2, None, None),
                "gone": (2, None, None), "lost": (2, None, None)}
        # The scenarios at once: most of their time is torch's import and
        # waits for timeouts, and each measures its times from after its
        # store is up.
        with ThreadPoolExecutor(len(jobs)) as pool:
            futures = {name: pool.submit(run, name, p, tmp, script, extra)
                       for name, (p, script, extra) in jobs.items()
                       if want(name)}
        results = {name: f.result() for name, f in futures.items()}
        if want("key"):
            res = results["key"]
            for r, (code, _, text) in enumerate(res):
                check(code == 0, f"key: rank {r} exited {code}", text)
            key = open(key_out).read() if os.path.exists(key_out) else ""
            check(re.fullmatch(r"[0-9a-f]{64}", key),
                  f"key: the store's key is {len(key)} characters, not 64 hex "
                  "digits")
            for r, (_, _, text) in enumerate(res):
                check(key and key not in text and key.upper() not in text,
                      f"key: rank {r} printed the job key", text)
            # The logs were on: something was said, just not the key.
            check("crnet[" in res[0][2], "key: crnet's debug log said nothing",
                  res[0][2])
            no_key_form("key", res)
            print("key: the job ran, its key is in torch's store and in no "
                  f"output ({sum(len(t) for _, _, t in res)} bytes of logs)")

        if want("dies"):
            res = results["dies"]
            for r in (0, 1):
                code, got, text = res[r]
                err = (got or {}).get("error") or ""
                secs = (got or {}).get("seconds") or 0
                check("joining the job failed: CRNET_ETIMEDOUT" in err
                      and re.search(r"\b2\b", err),
                      f"dies: rank {r} raised {err!r}", text)
                check(secs < LATE_S, f"dies: rank {r} took {secs:.2f} s", text)
                print(f"dies: rank {r} after {secs:.2f} s: {err}")
            check(res[2][0] == 3, f"dies: rank 2 exited {res[2][0]}", res[2][2])
            no_key_form("dies", res)

        if want("late"):
            res = results["late"]
            code, got, text = res[1]
            err = (got or {}).get("error") or ""
            secs = (got or {}).get("seconds") or 0
            check("CRNET_ETIMEDOUT" in err and "crnet.key from rank 0" in err,
                  f"late: rank 1 raised {err!r}", text)
            check(TIMEOUT_S - 0.5 <= secs < LATE_S,
                  f"late: rank 1 after {secs:.2f} s", text)
            check(res[0][0] == 0, f"late: rank 0 exited {res[0][0]}", res[0][2])
            print(f"late: rank 1 after {secs:.2f} s: {err}")
            no_key_form("late", res)

        if want("gone"):
            res = results["gone"]
            code, got, text = res[1]
            err = (got or {}).get("error") or ""
            secs = (got or {}).get("seconds") or 0
            check("joining the job failed: CRNET_EIO" in err
                  and "torch's store" in err,
                  f"gone: rank 1 raised {err!r}", text)
            check(secs < 5 * SCALE, f"gone: rank 1 after {secs:.2f} s", text)
            print(f"gone: rank 1 after {secs:.2f} s: {err}")
            no_key_form("gone", res)

        if want("lost"):
            res = results["lost"]
            code, got, text = res[0]
            err = (got or {}).get("error") or ""
            secs = (got or {}).get("seconds") or 0
            check("CRNET_EPEER" in err and re.search(r"\brank 1\b", err),
                  f"lost: rank 0 raised {err!r}", text)
            check(secs < 5 * SCALE, f"lost: rank 0 after {secs:.2f} s", text)
            check(res[1][0] == 3, f"lost: rank 1 exited {res[1][0]}",
                  res[1][2])
            print(f"lost: rank 0 after {secs:.2f} s: {err}")
            no_key_form("lost", res)

    print(f"test_env_failures: {'FAILED' if failed else 'passed'}",
          flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--rank":
        rank_main(sys.argv[2])
    else:
        import faulthandler
        from torchtest import need_torch
        need_torch()
        faulthandler.cancel_dump_traceback_later()
        main(sys.argv[1:])
