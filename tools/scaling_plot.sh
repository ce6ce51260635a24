#!/bin/sh
# The scaling picture of docs/SCALING.md: crsched's closed-form model
# (crsched --cost --sweep) of allreduce from p = 2 to 10^6, for an 8-byte
# and a 1 MiB vector, and the peers one rank talks to, per schedule. Model
# times, not measurements: see docs/SCALING.md.
#
#   tools/scaling_plot.sh [BUILD_DIR [OUT.png]] [-- crsched options]
#
# BUILD_DIR defaults to build, OUT to docs/img/scaling.png. Options after
# -- go to crsched (e.g. --tuning FILE, or --alpha A --beta B --gamma G);
# without them the constants are those a job would use here (crsched
# reads CRNET_TUNING_FILE or the default place; CRNET_TUNING_FILE= means
# the built-in defaults, which is how the committed picture was made).
# Needs gnuplot (Debian: gnuplot-nox). Run from the source tree.
set -eu

build=build
out=docs/img/scaling.png
if [ $# -gt 0 ] && [ "$1" != "--" ]; then build=$1; shift; fi
if [ $# -gt 0 ] && [ "$1" != "--" ]; then out=$1; shift; fi
if [ $# -gt 0 ] && [ "$1" = "--" ]; then shift; fi

crsched=$build/tools/crsched
[ -x "$crsched" ] || { echo "scaling_plot.sh: no $crsched; build first" >&2; exit 1; }
command -v gnuplot > /dev/null 2>&1 ||
  { echo "scaling_plot.sh: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$crsched" --cost --sweep --coll allreduce -m 8,1048576 --dat "$@" \
  > "$tmp/sweep.dat"
tuning=$(sed -n '1s/^# crsched --cost --sweep; tuning: //p' "$tmp/sweep.dat")
schedules="circulant-linear ring rabenseifner hypercube circulant"
# one file per (schedule, size): columns p rounds peers seconds
for s in $schedules; do
  for m in 8 1048576; do
    awk -v s="$s" -v m="$m" '!/^#/ && $3 == s && $4 == m {print $1, $5, $6, $9}' \
      "$tmp/sweep.dat" > "$tmp/$s.$m"
  done
done

plots() { # plots SIZE COLUMN: one line per schedule
  sep=""
  for s in $schedules; do
    printf '%s"%s/%s.%s" using 1:%s with linespoints title "%s"' \
      "$sep" "$tmp" "$s" "$1" "$2" "$s"
    sep=", "
  done
}

gnuplot <<GP
set terminal pngcairo size 1200,420 font "sans,10"
set output "$out"
set multiplot layout 1,3 title "allreduce, closed-form α-β-γ model (crsched --cost --sweep); $tuning"
set logscale xy
set format x "10^{%L}"
set format y "10^{%L}"
set xlabel "p"
set grid
set key top left
set pointsize 0.4
set ylabel "model time (s)"
set title "8-byte vector"
plot $(plots 8 4)
set title "1 MiB vector"
set key off
plot $(plots 1048576 4)
set title "distinct peers of one rank (links needed)"
set ylabel "peers"
plot $(plots 8 3)
unset multiplot
GP
echo "wrote $out"
