#!/usr/bin/env bash
# What a crnet job costs to start under the launchers people already use,
# over what the launcher costs by itself (docs/STARTING.md, "Start-up
# cost"): per launcher, a job of P ranks that joins, runs one small
# allreduce and leaves (tools/allreduce_time auto 4 1), against the same
# launcher starting P times /bin/true (for srun --mpi=pmix: srun without
# PMIx). Under the PMIx launchers a third program, tools/pmix_floor, does
# what crnet's start does with PMIx and nothing else (init, put, fence,
# get, finalize): the floor no PMIx program goes under. Rounds interleave
# every launcher and program, so the machine's noise falls on all alike;
# medians and their differences are printed.
#
#   tools/bench/launch_overhead.sh BUILD [P] [ROUNDS]
#
# BUILD is a meson build tree with PMIx (src/crlaunch,
# tools/allreduce_time). Launchers: srun --mpi=pmix and salloc + crlaunch
# on a one-node Slurm brought up for the run (tools/slurm_local.sh: needs
# root, slurm-wlm, munge), Open MPI's mpirun (openmpi-bin), and crlaunch
# alone. P defaults to 16, ROUNDS to 7.
set -euo pipefail
build=$(realpath "$1")
p=${2:-16}
rounds=${3:-7}
src=$(realpath "$(dirname "$0")/../..")
app=$build/tools/allreduce_time
floor=$build/tools/pmix_floor
crlaunch=$build/src/crlaunch
[ -x "$app" ] && [ -x "$crlaunch" ] && [ -x "$floor" ] ||
  { echo "no $app, $floor or $crlaunch (a build with PMIx)"; exit 2; }

tmp=$(mktemp -d /tmp/crnet-launch-bench.XXXXXX)
chmod 755 "$tmp"
# shellcheck source=../slurm_local.sh
. "$src/tools/slurm_local.sh"
trap 'slurm_local_down "$tmp"; rm -rf "$tmp"' EXIT
slurm_local_up "$tmp" >/dev/null || { echo "Slurm did not start"; exit 1; }

mpirun="mpirun --allow-run-as-root --oversubscribe -np $p"
# The job's launcher, and the one /bin/true runs under: srun's baseline is
# srun without PMIx, as a site's default start of a non-MPI program.
launchers=("srun --mpi=pmix -n $p" "$mpirun" "salloc -n $p $crlaunch" "$crlaunch -n $p")
baselines=("srun -n $p" "$mpirun" "salloc -n $p $crlaunch" "$crlaunch -n $p")
names=("srun --mpi=pmix" "mpirun" "salloc + crlaunch" "crlaunch")

# One start: its wall time in seconds on stdout; a failure stops the run.
once() {
  local t0 t1
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086 # the launcher's words
  if ! timeout 120 $1 "${@:2}" >"$tmp/out" 2>"$tmp/err"; then
    echo "failed: $1 ${*:2}" >&2
    tail -n 5 "$tmp/out" "$tmp/err" >&2
    exit 1
  fi
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }'
}

: >"$tmp/rows"
for r in $(seq "$rounds"); do
  for i in "${!launchers[@]}"; do
    # crlaunch runs /bin/true as well: a program that never joins.
    echo "$i true $(once "${baselines[$i]}" /bin/true)" >>"$tmp/rows"
    echo "$i app $(once "${launchers[$i]}" "$app" auto 4 1)" >>"$tmp/rows"
    if [ "$i" -lt 2 ]; then
      echo "$i floor $(once "${launchers[$i]}" "$floor")" >>"$tmp/rows"
    fi
  done
  echo "round $r of $rounds done" >&2
done

python3 - "$tmp/rows" "$p" "$rounds" "${names[@]}" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
p, rounds, names = sys.argv[2], sys.argv[3], sys.argv[4:]
print(f"p = {p}, {rounds} interleaved rounds, medians in seconds "
      f"({p} ranks share this machine's cores)")
print(f"{'launcher':<18} {'/bin/true':>9} {'PMIx alone':>10} {'crnet job':>9}"
      f" {'over true':>9} {'over PMIx':>9}")
def median(i, kind):
    v = [float(r[2]) for r in rows if r[0] == str(i) and r[1] == kind]
    return st.median(v) if v else None
for i, name in enumerate(names):
    t, f, a = median(i, "true"), median(i, "floor"), median(i, "app")
    fs = f"{f:>10.3f}" if f is not None else f"{'-':>10}"
    over = f"{a - f:>+9.3f}" if f is not None else f"{'-':>9}"
    print(f"{name:<18} {t:>9.3f} {fs} {a:>9.3f} {a - t:>+9.3f} {over}")
PY
