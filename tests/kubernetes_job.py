"""examples/kubernetes/job.yaml, checked without a cluster.

    kubernetes_job.py MANIFEST PROGRAM

Reads the manifest as Kubernetes would and checks what makes the recipe
work: an Indexed Job whose completions, parallelism and CRNET_SIZE agree;
CRNET_RANK taken from the completion index; CRNET_RENDEZVOUS naming pod 0
as the headless Service resolves it (<job>-0.<subdomain>), a Service that
selects the Job's pods and resolves before they are ready; the key file
inside the Secret's mount, readable by the pod only. Then it gives PROGRAM
(hello_allreduce) each pod's environment as Kubernetes would (the index in
place of the annotation, the Secret as a file, pod 0's name as 127.0.0.1)
and runs the pods as processes on this host: the job must give the right
sum over all of them.
"""
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile

import yaml

INDEX_ANNOTATION = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def main():
    manifest, program = sys.argv[1], os.path.realpath(sys.argv[2])
    with open(manifest, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    kinds = {d["kind"]: d for d in docs}
    check(set(kinds) == {"Service", "Job"},
          "expected a Service and a Job, found %s" % sorted(kinds))
    svc, job = kinds["Service"], kinds["Job"]
    name = job["metadata"]["name"]
    spec = job["spec"]
    pod = spec["template"]["spec"]

    check(spec.get("completionMode") == "Indexed",
          "the Job must be Indexed, so that every pod has an index")
    size = spec["completions"]
    check(spec.get("parallelism") == size,
          "parallelism %s != completions %s: every rank must run at once"
          % (spec.get("parallelism"), size))
    check(pod.get("restartPolicy") == "Never",
          "restartPolicy must be Never: a restarted rank cannot rejoin")

    # The headless Service names the pods <hostname>.<subdomain>.
    check(svc["spec"].get("clusterIP") == "None",
          "the Service must be headless (clusterIP: None)")
    check(svc["spec"].get("publishNotReadyAddresses") is True,
          "the Service must publish pods before they are ready")
    check(pod.get("subdomain") == svc["metadata"]["name"],
          "the pods' subdomain %r is not the Service %r"
          % (pod.get("subdomain"), svc["metadata"]["name"]))
    # Kubernetes labels a Job's pods job-name=<job>.
    check(svc["spec"]["selector"] == {"job-name": name},
          "the Service selects %r, not the Job's pods (job-name: %s)"
          % (svc["spec"]["selector"], name))

    containers = pod["containers"]
    check(len(containers) == 1, "one container per pod")
    c = containers[0]
    env = {e["name"]: e for e in c["env"]}
    for var in ("CRNET_RANK", "CRNET_SIZE", "CRNET_RENDEZVOUS",
                "CRNET_JOB_KEY_FILE"):
        check(var in env, "%s is not set" % var)
    check("CRNET_JOB_KEY" not in env,
          "the key itself must not be in the pod spec")
    check(env["CRNET_RANK"].get("valueFrom", {}).get("fieldRef", {})
          .get("fieldPath") == INDEX_ANNOTATION,
          "CRNET_RANK must come from the completion index")
    check(env["CRNET_SIZE"].get("value") == str(size),
          "CRNET_SIZE %r != completions %d" % (env["CRNET_SIZE"].get("value"),
                                               size))
    rdv = env["CRNET_RENDEZVOUS"]["value"]
    m = re.fullmatch(r"([a-z0-9.-]+):([0-9]+)", rdv)
    check(m is not None, "CRNET_RENDEZVOUS %r is not host:port" % rdv)
    check(m.group(1) == "%s-0.%s" % (name, pod["subdomain"]),
          "CRNET_RENDEZVOUS %r is not pod 0 (%s-0.%s)"
          % (rdv, name, pod["subdomain"]))
    port = int(m.group(2))
    check(1 <= port <= 65535, "port %d" % port)

    # The key file lies in a read-only mount of a Secret, readable by the
    # pod's group at most.
    key_path = env["CRNET_JOB_KEY_FILE"]["value"]
    mounts = [v for v in c["volumeMounts"]
              if os.path.dirname(key_path) == v["mountPath"].rstrip("/")]
    check(len(mounts) == 1, "CRNET_JOB_KEY_FILE %s is in no volume mount"
          % key_path)
    check(mounts[0].get("readOnly") is True, "the key mount must be read-only")
    vols = {v["name"]: v for v in pod["volumes"]}
    secret = vols[mounts[0]["name"]].get("secret")
    check(secret is not None, "the key must come from a Secret")
    mode = secret.get("defaultMode", 0o644)
    check(mode & 0o037 == 0,
          "the key file's mode %o lets others read it" % mode)
    if mode & 0o040:
        check(pod.get("securityContext", {}).get("fsGroup") is not None,
              "a group-readable key needs the pod's fsGroup")

    # The pods, as processes here. Kubernetes' part done by hand: the index
    # in CRNET_RANK, the Secret as a file of that mode, pod 0's DNS name as
    # this host's loopback (a free port in place of the manifest's, which
    # may be taken here).
    with tempfile.TemporaryDirectory() as tmp:
        key_file = os.path.join(tmp, os.path.basename(key_path))
        with open(key_file, "w", encoding="ascii") as f:
            f.write(secrets.token_hex(32))
        os.chmod(key_file, mode)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
        s.close()
        procs = []
        for index in range(size):
            pod_env = {k: v for k, v in os.environ.items()
                       if not k.startswith("CRNET_")}
            for var, e in env.items():
                if "value" in e:
                    pod_env[var] = e["value"]
                elif e["valueFrom"]["fieldRef"]["fieldPath"] == INDEX_ANNOTATION:
                    pod_env[var] = str(index)
            pod_env["CRNET_RENDEZVOUS"] = "127.0.0.1:%d" % free
            pod_env["CRNET_JOB_KEY_FILE"] = key_file
            procs.append(subprocess.Popen([program], env=pod_env,
                                          stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        outs = []
        for index, p in enumerate(procs):
            try:
                out, _ = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                fail("pod %d did not finish in 120 s" % index)
            outs.append(out)
            check(p.returncode == 0, "pod %d exited %d: %s"
                  % (index, p.returncode, out))
        want = size * (size + 1) // 2
        line = "allreduce over %d ranks: sum of rank+1 = %d (expected %d)" % (
            size, want, want)
        check(line in outs[0] and " 0 wrong" in outs[0],
              "pod 0 printed %r, not %r" % (outs[0], line))
        print("ok: %s: %d pods, rank = completion index, rendezvous %s; "
              "run here: %s" % (manifest, size, rdv, outs[0].strip()))


if __name__ == "__main__":
    main()
