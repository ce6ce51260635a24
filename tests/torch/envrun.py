#!/usr/bin/env python3
"""Starts a job the way torchrun and a Kubernetes PyTorchJob do (env://),
for the tests of the crnet backend without crlaunch:

    envrun.py -n P [--timeout S] [--key-file] /usr/bin/python3 script.py ...

runs P processes of the command with RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and MASTER_PORT (a free port), and
none of crnet's variables that name a job (CRNET_RANK, CRNET_RENDEZVOUS,
...). Debian's torchrun (torch 1.13) fails on Python 3.11, hence this.
With --key-file every rank gets CRNET_JOB_KEY_FILE, a fresh key in a
private file (removed at the end), as docs/STARTING.md advises for a store
that others can reach: rank 0 then publishes no key.

Exits 0 when every rank exited 0; else 1, naming each rank's exit status.
Nothing hangs: after the first rank fails the others get GRACE_S to end,
and after --timeout every rank still running is killed (exit 1). A rank
that exits 77 (the scripts' skip, torch missing) makes the job a skip.

The tests that watch ranks fail import start() and finish() instead.
"""
import argparse
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time

# After one rank has failed, how long the others have to notice and end.
GRACE_S = 20.0

# crnet's variables that would make crnet_torch take the job from crnet's
# environment instead of torch's store.
JOB_VARIABLES = ("CRNET_RANK", "CRNET_SIZE", "CRNET_RENDEZVOUS",
                 "CRNET_JOB_KEY", "CRNET_JOB_KEY_FILE", "CRNET_LAUNCHER_FD",
                 "CRNET_LOCAL_RANK", "CRNET_LOCAL_SIZE")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank, p, port, extra=None):
    """The environment of rank `rank` of p, as torch's launchers set it,
    with `extra`'s variables (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k not in JOB_VARIABLES}
    env.update({"RANK": str(rank), "WORLD_SIZE": str(p),
                "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(p),
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    for k, v in (extra or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def start(p, argv, extra=None, capture=False, port=None):
    """P processes of argv; with capture, their stdout and stderr go to
    pipes (read them with finish)."""
    port = port or free_port()
    out = subprocess.PIPE if capture else None
    err = subprocess.STDOUT if capture else None
    return [subprocess.Popen(argv, env=rank_env(r, p, port, extra),
                             stdout=out, stderr=err, text=capture)
            for r in range(p)]


def finish(procs, timeout, grace=GRACE_S):
    """Waits for every process, at most `timeout` seconds in all and
    `grace` seconds after the first that failed; kills what is left.
    Returns (exit statuses, outputs, whether any was killed); an output is
    '' unless start() captured it. Outputs are read as the ranks run, so
    a full pipe never stalls one."""
    import threading
    outs = [""] * len(procs)

    def reader(k):
        outs[k] = procs[k].stdout.read()

    readers = [threading.Thread(target=reader, args=(k,), daemon=True)
               for k, pr in enumerate(procs) if pr.stdout is not None]
    for t in readers:
        t.start()
    deadline = time.monotonic() + timeout
    killed = False
    while any(pr.poll() is None for pr in procs):
        now = time.monotonic()
        if any(pr.returncode not in (None, 0) for pr in procs):
            deadline = min(deadline, now + grace)
        if now > deadline:
            for pr in procs:
                if pr.poll() is None:
                    pr.kill()
                    killed = True
            break
        time.sleep(0.02)
    codes = [pr.wait() for pr in procs]
    for t in readers:
        t.join(10)
    return codes, outs, killed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, required=True, help="ranks")
    ap.add_argument("--timeout", type=float, default=120,
                    help="seconds the job may take (default 120)")
    ap.add_argument("--key-file", action="store_true",
                    help="give every rank CRNET_JOB_KEY_FILE, a fresh key")
    ap.add_argument("argv", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    if a.n < 1 or not argv:
        ap.error("need -n P >= 1 and a command")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:  # 0700
        extra = {}
        if a.key_file:
            extra["CRNET_JOB_KEY_FILE"] = os.path.join(tmp, "job.key")
            fd = os.open(extra["CRNET_JOB_KEY_FILE"],
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
        codes, _, killed = finish(start(a.n, argv, extra), a.timeout)
    bad = [(r, c) for r, c in enumerate(codes) if c != 0]
    if bad and all(c == 77 for _, c in bad):
        sys.exit(77)
    if bad:
        print("envrun: %s after %.1f s%s" % (
            ", ".join("rank %d exited %d" % rc for rc in bad),
            time.monotonic() - t0,
            " (killed at the timeout or after another rank failed)"
            if killed else ""), file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
