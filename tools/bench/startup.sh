#!/usr/bin/env bash
# Job start-up cost: `crlaunch -n P` of a program that only inits and
# destroys, beside `mpirun.openmpi -n P` of MPI_Init/MPI_Finalize, measured in
# the same run with hyperfine (medians), plus idle RSS per rank after init.
#
#   tools/bench/startup.sh [P] [build-dir]
#
# Needs hyperfine, and openmpi-bin + libopenmpi-dev for the comparison.
set -euo pipefail
p=${1:-16}
build=$(realpath "${2:-build}")
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/trivial_crnet.c" <<'C'
#include <crnet.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
  crnet_comm *c;
  if (crnet_comm_init(&c, NULL) != 0) {
    fprintf(stderr, "%s\n", crnet_init_errmsg());
    return 1;
  }
  if (argc > 1) {
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
      if (strncmp(line, "VmRSS:", 6) == 0)
        printf("%s", line + 6);
    if (f != NULL)
      fclose(f);
  }
  return crnet_comm_destroy(c) == 0 ? 0 : 1;
}
C
cc -O2 -o "$work/trivial_crnet" "$work/trivial_crnet.c" -I"$src/include" -I"$build" \
  -L"$build/src" -lcrnet -Wl,-rpath,"$build/src"

echo "idle RSS per rank after init at p=$p (kB):"
"$build/src/crlaunch" -n "$p" "$work/trivial_crnet" rss | awk '{print $1}' | sort -n |
  awk '{a[NR]=$1} END {printf "  min %d  median %d  max %d\n", a[1], a[int((NR+1)/2)], a[NR]}'

cmds=("$build/src/crlaunch -n $p $work/trivial_crnet")
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
  printf '#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n' >"$work/trivial_mpi.c"
  mpicc.openmpi -O2 -o "$work/trivial_mpi" "$work/trivial_mpi.c"
  cmds+=("mpirun.openmpi --allow-run-as-root --oversubscribe -n $p $work/trivial_mpi")
fi
hyperfine -N -w 2 -r 15 --export-json "$work/h.json" "${cmds[@]}" >/dev/null
python3 - "$work/h.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
for x in r:
    print(f"  {x['command'].split()[0].split('/')[-1]:16s} median {x['median']*1e3:7.1f} ms  (min {x['min']*1e3:.1f}, max {x['max']*1e3:.1f})")
if len(r) == 2:
    print(f"  crlaunch / mpirun (medians): {r[0]['median']/r[1]['median']:.3f}")
PY
