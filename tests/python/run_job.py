"""Runs one case of failures.py as a crlaunch job and judges its outcome.

    run_job.py CASE P

The environment (set by meson, src/python/meson.build): CRLAUNCH, the
launcher; PYTHONPATH, where the module is; CRNET_PY_WRAP, optionally, a
command the ranks run under (valgrind); the interpreter is this one
(sys.executable), the one the module was built for. Prints the job's output
and one line per check; exits 0 if every check holds, 1 if not. The job is
bounded by crlaunch --timeout and by this script's own timeout, so nothing
hangs.

Cases and what must hold:
  peer-lost      the last rank kills itself (SIGKILL) once the others are
                 in allreduces (each writes a file then): every survivor raises PeerLost within 2 s
                 of the kill, and again at its next call (sticky); crlaunch
                 exits 137 (128 + SIGKILL)
  survive        under crlaunch --keep-going, the last rank kills itself
                 once the others' allreduces are in flight: each survivor
                 raises PeerLost or Revoked there, Revoked after its own
                 revoke(), PeerLost (flag True) from agree before
                 ack_lost(), then agrees (False: rank 0 says so), shrinks
                 to a comm of p - 1 in the same order whose allreduce is
                 right; crlaunch exits 0
  grow           under crlaunch --restart 1, the last rank kills itself;
                 the survivors revoke and grow until the restarted rank
                 is in: a comm of p again, survivors in their order, the
                 newcomer last (joined True, its job rank p, the first
                 restart slot), whose allreduce is right everywhere;
                 crlaunch names the restart and exits 0
  abort          rank 1 calls comm.abort(7) once the others are in
                 allreduces: every other rank raises
                 Aborted with abort_code 7; crlaunch exits 7
  mismatch       rank 0 allreduces 4 items, the others 5: every rank
                 raises Mismatch
  timeout        Comm(timeout=1.0), rank 0 late (it calls once every other
                 rank has timed out): the others
                 raise Timeout after about a second; rank 0 raises an error
                 at its allreduce or, if that completed (the others' data
                 had left), at its next call
  exit-open      comms (world, split, dups) left open at exit: closed by the
                 exit hook, derived first; crlaunch exits 0
  exit-inflight  calls in flight at exit (kept and dropped): completed by
                 the exit hook with the right results; crlaunch exits 0
  exit-stuck     irecvs that never get their message (each rank's from the
                 next): the exit hook waits
                 crnet.exit_grace (1 s), says so and aborts the job;
                 crlaunch exits 1 within seconds, nothing hangs
  gc-order       the world comm dropped before its split: the split keeps
                 it alive, both are destroyed when the split goes
"""

import json
import os
import subprocess
import sys
import tempfile
import time

from time_scale import seconds

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    case, p = sys.argv[1], int(sys.argv[2])
    crlaunch = os.environ["CRLAUNCH"]
    failures = []

    def expect(cond, what):
        print("%s %s" % ("ok  " if cond else "FAIL", what))
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="crnet-py-") as out:
        # CRNET_PY_WRAP: a command every rank runs under (valgrind ...).
        wrap = os.environ.get("CRNET_PY_WRAP", "").split()
        keep = {"survive": ["--keep-going"], "grow": ["--restart", "1"]}.get(case, [])
        cmd = [crlaunch, "-n", str(p), "--timeout", "%g" % seconds(60)] + keep + wrap + [
            sys.executable, os.path.join(HERE, "failures.py"), case, out]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=seconds(100))
        elapsed = time.monotonic() - t0
        print("$ " + " ".join(cmd))
        print(proc.stdout.rstrip())
        print("-- crlaunch exited %d after %.2f s" % (proc.returncode, elapsed))
        seen = {}
        for r in range(p):
            path = os.path.join(out, "rank%d.json" % r)
            if os.path.exists(path):
                with open(path) as f:
                    seen[r] = json.load(f)
        for r in sorted(seen):
            print("rank %d: %s" % (r, json.dumps(seen[r], sort_keys=True)))
        restart = {}
        if os.path.exists(os.path.join(out, "restart.json")):
            with open(os.path.join(out, "restart.json")) as f:
                restart = json.load(f)
            print("restarted rank: %s" % json.dumps(restart, sort_keys=True))

    def ranks(rs):
        return [seen.get(r, {}) for r in rs]

    if case == "peer-lost":
        victim = p - 1
        killed = seen.get(victim, {}).get("killed")
        expect(killed is not None, "the victim (rank %d) recorded its kill" % victim)
        expect(proc.returncode == 137, "crlaunch exits 137 (the victim's SIGKILL)")
        for r, s in zip(range(victim), ranks(range(victim))):
            expect(s.get("class") == "PeerLost",
                   "rank %d raised PeerLost (%s: %s)" % (r, s.get("class"), s.get("errmsg")))
            expect("when" in s, "rank %d recorded when it raised" % r)
            if killed is not None and "when" in s:
                dt = s["when"] - killed
                expect(dt < seconds(2.0), "rank %d raised it %.3f s after the kill (< %g s)"
                       % (r, dt, seconds(2.0)))
            expect(s.get("code") == -3, "rank %d: code EPEER" % r)
            expect(s.get("sticky") == "PeerLost", "rank %d: the next call raises PeerLost too" % r)
    elif case == "survive":
        victim = p - 1
        expect(seen.get(victim, {}).get("killed") is not None,
               "the victim (rank %d) recorded its kill" % victim)
        expect(proc.returncode == 0, "crlaunch --keep-going exits 0")
        expect("rank %d" % victim in proc.stdout and "the others go on" in proc.stdout,
               "crlaunch named the loss and went on")
        for r, s in zip(range(victim), ranks(range(victim))):
            expect(s.get("first") in ("PeerLost", "Revoked"),
                   "rank %d: the call in flight raised PeerLost or Revoked (%s: %s)"
                   % (r, s.get("first"), s.get("first_errmsg")))
            expect(s.get("after_revoke") == "Revoked" and s.get("revoked") is True,
                   "rank %d: Revoked after revoke() (%s), .revoked %s"
                   % (r, s.get("after_revoke"), s.get("revoked")))
            expect(s.get("agree_unacked") == "PeerLost" and s.get("agree_unacked_flag") is True,
                   "rank %d: agree before ack_lost raised PeerLost, flag True (%s, %s)"
                   % (r, s.get("agree_unacked"), s.get("agree_unacked_flag")))
            expect(s.get("lost") == [victim] and s.get("acked") == 1,
                   "rank %d: lost() %s, ack_lost() %s" % (r, s.get("lost"), s.get("acked")))
            expect(s.get("agreed") is False, "rank %d: agree gave False" % r)
            expect(s.get("shrunk") == [r, p - 1] and
                   s.get("shrunk_sum") == (p - 1) * (p - 2) // 2,
                   "rank %d: shrunk comm %s, sum %s" % (r, s.get("shrunk"), s.get("shrunk_sum")))
    elif case == "grow":
        victim = p - 1
        want_sum = p * (p - 1) // 2
        expect(seen.get(victim, {}).get("killed") is not None,
               "the victim (rank %d) recorded its kill" % victim)
        expect(proc.returncode == 0, "crlaunch --restart exits 0")
        expect("rank %d started again" % victim in proc.stdout,
               "crlaunch named the restart")
        for r, s in zip(range(victim), ranks(range(victim))):
            expect(s.get("joined") is False, "rank %d: joined False" % r)
            expect(s.get("grown") == [r, p] and s.get("grown_sum") == want_sum,
                   "rank %d: grown comm %s, sum %s" % (r, s.get("grown"), s.get("grown_sum")))
        expect(restart.get("joined") is True and restart.get("grown") == [p - 1, p] and
               restart.get("job_rank") == p and restart.get("grown_sum") == want_sum,
               "the restarted rank: joined, rank %d of %d, job rank %d, sum %d (%s)"
               % (p - 1, p, p, want_sum, restart))
    elif case == "abort":
        expect(proc.returncode == 7, "crlaunch exits with the abort code 7")
        for r in range(p):
            if r == 1:
                continue
            s = seen.get(r, {})
            expect(s.get("class") == "Aborted" and s.get("abort_code") == 7,
                   "rank %d raised Aborted with abort_code 7 (%s %s)"
                   % (r, s.get("class"), s.get("abort_code")))
            expect("rank 1" in s.get("errmsg", ""), "rank %d's message names rank 1: %r"
                   % (r, s.get("errmsg")))
    elif case == "mismatch":
        for r, s in zip(range(p), ranks(range(p))):
            expect(s.get("class") == "Mismatch",
                   "rank %d raised Mismatch (%s: %s)" % (r, s.get("class"), s.get("errmsg")))
    elif case == "timeout":
        for r, s in zip(range(1, p), ranks(range(1, p))):
            expect(s.get("class") == "Timeout" and s.get("code") == -4,
                   "rank %d raised Timeout (%s: %s)" % (r, s.get("class"), s.get("errmsg")))
            expect(0.9 <= s.get("seconds", 0) < 1 + seconds(1.9),
                   "rank %d timed out after %.2f s (timeout 1 s)" % (r, s.get("seconds", -1)))
        s = seen.get(0, {})
        expect(s.get("code") is not None and s.get("code") < 0,
               "rank 0 (late) raised a crnet.Error at its allreduce or the "
               "call after (%s)" % s.get("class"))
    elif case == "exit-open":
        expect(proc.returncode == 0, "crlaunch exits 0")
        for r, s in zip(range(p), ranks(range(p))):
            expect(s.get("closed") == [True] * 4, "rank %d: every comm closed at exit %r"
                   % (r, s.get("closed")))
        expect(elapsed < seconds(30), "the job ended in %.1f s" % elapsed)
    elif case == "exit-inflight":
        expect(proc.returncode == 0, "crlaunch exits 0")
        for r, s in zip(range(p), ranks(range(p))):
            expect(s.get("done") == [True] * 3 and s.get("ok") == [True] * 3,
                   "rank %d: the calls in flight completed right %r %r"
                   % (r, s.get("done"), s.get("ok")))
            expect(s.get("dropped_ok") is True, "rank %d: the dropped call completed" % r)
            expect(s.get("closed") == [True, True], "rank %d: comms closed" % r)
    elif case == "exit-stuck":
        expect(proc.returncode == 1, "crlaunch exits 1 (the exit hook's abort)")
        expect("still in flight" in proc.stdout and "aborting the job" in proc.stdout,
               "the exit hook said why it aborted")
        expect(elapsed < seconds(30), "the job ended in %.1f s" % elapsed)
    elif case == "gc-order":
        expect(proc.returncode == 0, "crlaunch exits 0")
        for r, s in zip(range(p), ranks(range(p))):
            expect(s.get("alive_after_del") is True and s.get("ok") is True
                   and s.get("gone") is True,
                   "rank %d: the world outlived its split and went with it %r" % (r, s))
    else:
        print("unknown case %r" % case)
        return 2

    if failures:
        print("%s at p = %d: %d check(s) failed" % (case, p, len(failures)))
        return 1
    print("%s at p = %d: passed" % (case, p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
