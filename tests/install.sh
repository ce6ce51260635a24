#!/bin/sh
# meson install, checked as a user would meet it: the build tree is
# installed under a temporary DESTDIR, and then only the installed files are
# used. examples/hello_allreduce.c is compiled with the flags of the
# installed crnet.pc (no -I into the source or build tree), and through
# examples/Makefile, run on 3 ranks by the installed crlaunch against the
# installed libcrnet; the installed crbench and crsched run; crnet.pc, the
# header and crlaunch report the project's version; every man page renders
# without warnings, and every function of the installed crnet.h has a page.
#
#   tests/install.sh BUILD_DIR SOURCE_DIR VERSION LIBDIR BINDIR INCLUDEDIR \
#                    MANDIR [MAN]
#
# The directories are the configured absolute ones; MAN is man(1), or empty
# when the build found none (the pages are then only checked as text, and
# the test says so). CC is the compiler, MESON the meson command.
#
# DESTDIR rather than a second build with its own --prefix: installing the
# tree that is already built costs a second, where a fresh build costs
# minutes on two cores. --no-rebuild keeps `meson install` from running
# ninja inside `meson test`, which has just run it. The installed files keep
# the configured prefix in them (crnet.pc says prefix=/usr/local), so
# pkg-config gets PKG_CONFIG_SYSROOT_DIR, which puts DESTDIR in front of
# every path it prints, as it does for a cross build's sysroot.
#
# Every check prints "ok" or "FAIL" with what it saw; the script exits 1 if
# any failed, and removes everything it made, whatever happens.
set -u

BUILD=${1:?usage: install.sh BUILD SOURCE VERSION LIBDIR BINDIR INCLUDEDIR MANDIR [MAN]}
SOURCE=${2:?}
VERSION=${3:?}
LIBDIR=${4:?}
BINDIR=${5:?}
INCLUDEDIR=${6:?}
MANDIR=${7:?}
MAN=${8:-}
CC=${CC:-cc}
MESON=${MESON:-meson}

. "$(dirname "$0")/checks.sh"
# A check that cannot go on without its predecessor ends the test here.
give_up() {
  fail "$1"
  echo "install test: $fails of $checks checks failed (stopped early)"
  exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/crnet-install.XXXXXX") ||
  give_up "cannot make a temporary directory"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

root=$tmp/root
lib=$root$LIBDIR
bin=$root$BINDIR
man=$root$MANDIR

# --- the install itself ------------------------------------------------

if "$MESON" install -C "$BUILD" --no-rebuild --destdir "$root" \
  >"$tmp/install.log" 2>&1; then
  ok "meson install --destdir"
else
  sed 's/^/  | /' "$tmp/install.log"
  give_up "meson install --destdir failed (its output is above)"
fi

for f in "$lib/libcrnet.so" "$lib/libcrnet.so.0" "$lib/libcrnet.so.$VERSION" \
  "$lib/pkgconfig/crnet.pc" "$root$INCLUDEDIR/crnet.h" \
  "$root$INCLUDEDIR/crnet_version.h" "$bin/crlaunch" "$bin/crbench" \
  "$bin/crsched" "$man/man1/crlaunch.1" "$man/man1/crbench.1" \
  "$man/man1/crsched.1" "$man/man3/crnet.3"; do
  if [ -e "$f" ]; then ok "installed ${f#"$root"}"; else fail "missing ${f#"$root"}"; fi
done
# The installed tree must stand on its own: no rpath into the build tree
# left in a program or the library, no build path in crnet.pc or a header.
for f in "$bin/crlaunch" "$bin/crbench" "$bin/crsched" "$lib/libcrnet.so.$VERSION"; do
  if ! dyn=$(LC_ALL=C readelf -d "$f" 2>&1); then
    fail "readelf -d ${f#"$root"}: $dyn"
  else
    expect "${f#"$root"} has no rpath" \
      "$(printf '%s\n' "$dyn" | grep -E 'R(UN)?PATH')" ""
  fi
done
expect "crnet.pc and the headers name no build or source path" \
  "$(grep -lF -e "$BUILD" -e "$SOURCE" "$lib/pkgconfig/crnet.pc" \
    "$root$INCLUDEDIR/crnet.h" "$root$INCLUDEDIR/crnet_version.h")" ""
soname=$(LC_ALL=C readelf -d "$lib/libcrnet.so.$VERSION" 2>&1 |
  sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
expect "libcrnet's soname" "$soname" "libcrnet.so.0"

# --- pkg-config ----------------------------------------------------------

PKG_CONFIG_PATH=$lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
PKG_CONFIG_SYSROOT_DIR=$root
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
expect "pkg-config --modversion crnet" \
  "$(pkg-config --modversion crnet 2>&1)" "$VERSION"
cflags=$(pkg-config --cflags crnet 2>&1)
libs=$(pkg-config --libs crnet 2>&1)
expect "pkg-config --cflags crnet" "$(echo $cflags)" "-I$root$INCLUDEDIR"
expect "pkg-config --libs crnet" "$(echo $libs)" "-L$lib -lcrnet"
expect "crnet_version.h's version" \
  "$(sed -n 's/^#define CRNET_VERSION_STRING "\(.*\)"$/\1/p' "$root$INCLUDEDIR/crnet_version.h")" \
  "$VERSION"

# --- build the example against the installed files only -----------------

mkdir "$tmp/ex" "$tmp/mk"
cp "$SOURCE/examples/hello_allreduce.c" "$tmp/ex/"
cp "$SOURCE/examples/hello_allreduce.c" "$SOURCE/examples/Makefile" "$tmp/mk/"
mkdir "$tmp/mk/mpi"
cp "$SOURCE/examples/mpi/samplesort.c" "$tmp/mk/mpi/"
# Run from the copy's directory, so that no include path can reach the
# source tree by accident.
cd "$tmp/ex" || give_up "cannot enter $tmp/ex"
# shellcheck disable=SC2086 # the flags are words
if $CC -Wall -Wextra -Werror $cflags -o hello_allreduce hello_allreduce.c \
  $libs >"$tmp/cc.log" 2>&1; then
  ok "cc hello_allreduce.c \$(pkg-config --cflags --libs crnet)"
else
  sed 's/^/  | /' "$tmp/cc.log"
  give_up "hello_allreduce.c does not build against the installed crnet"
fi
if make -C "$tmp/mk" CC="$CC" CFLAGS="-O2 -Wall -Wextra -Werror" \
  >"$tmp/make.log" 2>&1 && [ -x "$tmp/mk/hello_allreduce" ] &&
  [ -x "$tmp/mk/mpi/samplesort" ]; then
  ok "make -C examples (mpi/samplesort with crnet-mpi.pc)"
else
  sed 's/^/  | /' "$tmp/make.log"
  fail "make -C examples failed (its output is above)"
fi
grep -q -- "-I$root$INCLUDEDIR" "$tmp/make.log" &&
  ! grep -qF "$SOURCE" "$tmp/make.log" && ok "make used crnet.pc's flags" ||
  fail "make's command line lacks crnet.pc's flags: $(cat "$tmp/make.log")"

LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
expect "hello_allreduce loads the installed libcrnet" \
  "$(ldd ./hello_allreduce | sed -n 's/^[[:space:]]*libcrnet\.so\.0 => \(.*\) (0x.*$/\1/p')" \
  "$lib/libcrnet.so.0"

# --- run it with the installed programs ----------------------------------

expect "crlaunch --version" "$("$bin/crlaunch" --version 2>&1)" \
  "crlaunch (crnet) $VERSION"
for prog in ./hello_allreduce "$tmp/mk/hello_allreduce"; do
  out=$("$bin/crlaunch" -n 3 --timeout 60 "$prog" 1000 2>&1)
  rc=$?
  expect "crlaunch -n 3 $prog: exit status" "$rc" 0
  got=$(printf '%s\n' "$out" |
    sed -n 's/^\(allreduce over 3 ranks: sum of rank+1 = 6 (expected 6); 1000 doubles\) in [0-9.]* ms, \(0 wrong\)$/\1, \2/p')
  expect "crlaunch -n 3 $prog: output" "$got" \
    "allreduce over 3 ranks: sum of rank+1 = 6 (expected 6); 1000 doubles, 0 wrong"
  [ "$got" = "" ] && printf '%s\n' "$out" | sed 's/^/  | /'
done
out=$("$bin/crlaunch" -n 2 --timeout 60 "$bin/crbench" -c allreduce -b 64 \
  -e 64 -n 2 -w 1 --check --no-link-limit --json 2>&1)
expect "installed crbench under installed crlaunch: exit status" "$?" 0
expect "installed crbench: one checked row, 0 wrong" \
  "$(printf '%s\n' "$out" | grep -c '"wrong": *0')" 1
out=$("$bin/crsched" --coll allreduce --schedule ring -p 3 --json 2>&1)
expect "installed crsched: exit status" "$?" 0
expect "installed crsched: ring allreduce at p = 3 sends in 2(p-1) rounds" \
  "$(printf '%s\n' "$out" | grep -c '"send_to":[0-9]')" 4

# --- crnet-mpi: mpi.h, libcrnet-mpi, crnet-mpi.pc, crnet-mpicc ---------------

for f in "$lib/libcrnet-mpi.so" "$lib/libcrnet-mpi.so.0" \
  "$lib/pkgconfig/crnet-mpi.pc" "$root$INCLUDEDIR/crnet-mpi/mpi.h" \
  "$bin/crnet-mpicc" "$man/man1/crnet-mpicc.1"; do
  if [ -e "$f" ]; then ok "installed ${f#"$root"}"; else fail "missing ${f#"$root"}"; fi
done
expect "no mpi.h in the include directory itself (it would shadow an MPI's)" \
  "$(ls "$root$INCLUDEDIR/mpi.h" 2>/dev/null)" ""
expect "pkg-config --cflags crnet-mpi" \
  "$(echo $(pkg-config --cflags crnet-mpi 2>&1))" "-I$root$INCLUDEDIR/crnet-mpi"
expect "pkg-config --libs crnet-mpi" \
  "$(echo $(pkg-config --libs crnet-mpi 2>&1))" "-L$lib -lcrnet-mpi -lcrnet"
# The wrapper names the installed paths (without DESTDIR, where a user
# finds them), and adds no link flags when only compiling.
expect "crnet-mpicc -show" "$(CRNET_MPICC_CC=cc "$bin/crnet-mpicc" -show a.c -o a)" \
  "cc -I$INCLUDEDIR/crnet-mpi a.c -o a -L$LIBDIR -Wl,-rpath,$LIBDIR -lcrnet-mpi -lcrnet"
expect "crnet-mpicc -show -c" "$(CRNET_MPICC_CC=cc "$bin/crnet-mpicc" -show -c a.c)" \
  "cc -I$INCLUDEDIR/crnet-mpi -c a.c"
if ! dyn=$(LC_ALL=C readelf -d "$lib/libcrnet-mpi.so.$VERSION" 2>&1); then
  fail "readelf -d libcrnet-mpi: $dyn"
else
  expect "libcrnet-mpi has no rpath" \
    "$(printf '%s\n' "$dyn" | grep -E 'R(UN)?PATH')" ""
fi
# Functions only: a data object would be copied into each program at link
# time, which would fix its size for good (a copy relocation).
expect "libcrnet-mpi exports no data objects" \
  "$(LC_ALL=C readelf --dyn-syms -W "$lib/libcrnet-mpi.so.$VERSION" |
    awk '$7 != "UND" && $4 == "OBJECT" { print $8 }')" ""
mkdir "$tmp/mpi"
cp "$SOURCE/tests/progs/mpi_check.c" "$SOURCE/tests/progs/mpi_expect.h" "$tmp/mpi/"
cd "$tmp/mpi" || give_up "cannot enter $tmp/mpi"
# shellcheck disable=SC2086 # the flags are words
if $CC -Wall -Wextra -Werror $(pkg-config --cflags crnet-mpi) -o mpi_check \
  mpi_check.c $(pkg-config --libs crnet-mpi) >"$tmp/mpicc.log" 2>&1; then
  ok "cc mpi_check.c \$(pkg-config --cflags --libs crnet-mpi)"
  out=$("$bin/crlaunch" -np 3 --timeout 60 ./mpi_check 2>&1)
  expect "crlaunch -np 3 mpi_check (the installed crnet-mpi): exit status" "$?" 0
  expect "mpi_check's verdict" "$out" "mpi_check: p = 3: every check held"
  expect "mpi_check loads the installed libcrnet-mpi" \
    "$(ldd ./mpi_check | sed -n 's/^[[:space:]]*libcrnet-mpi\.so\.0 => \(.*\) (0x.*$/\1/p')" \
    "$lib/libcrnet-mpi.so.0"
else
  sed 's/^/  | /' "$tmp/mpicc.log"
  fail "mpi_check.c does not build against the installed crnet-mpi"
fi
cd "$tmp" || give_up "cannot enter $tmp"

# --- man pages -------------------------------------------------------------

for page in man1/crlaunch.1 man1/crbench.1 man1/crsched.1 man1/crnet-mpicc.1 \
  man3/crnet.3; do
  f=$man/$page
  th=$(sed -n '1s/^\.TH [A-Z-]* [13] "[0-9-]*" "\(.*\)" "crnet manual"$/\1/p' "$f")
  expect "$page: its .TH line names crnet $VERSION" "$th" "crnet $VERSION"
  [ -n "$MAN" ] || continue
  MANWIDTH=80 MANPAGER=cat "$MAN" --warnings -l "$f" >"$tmp/page" 2>"$tmp/warn"
  rc=$?
  if [ $rc -eq 0 ] && [ ! -s "$tmp/warn" ] && [ "$(wc -l <"$tmp/page")" -gt 20 ]; then
    ok "man -l $page renders without warnings"
  else
    fail "man -l $page: status $rc, $(wc -l <"$tmp/page") lines, warnings: $(cat "$tmp/warn")"
  fi
done
# Every function of the installed header has a page in section 3 that
# sources crnet(3).
fns=$(grep '^CRNET_EXTERN' "$root$INCLUDEDIR/crnet.h" | grep -o 'crnet_[a-z0-9_]*(' | tr -d '(')
n=0
missing=""
for fn in $fns; do
  n=$((n + 1))
  [ "$(cat "$man/man3/$fn.3" 2>/dev/null)" = ".so man3/crnet.3" ] ||
    missing="$missing $fn"
done
expect "each of the $n functions of crnet.h has a man page" "$missing" ""
[ "$n" -ge 30 ] && ok "found $n functions in crnet.h" ||
  fail "found only $n functions in crnet.h: the header's layout changed?"
if [ -n "$MAN" ]; then
  title=$(MANWIDTH=80 MANPAGER=cat "$MAN" -M "$man" 3 crnet_allreduce 2>&1 | head -1)
  expect "man -M MANDIR 3 crnet_allreduce shows crnet(3)" "$(echo $title)" \
    "CRNET(3) crnet manual CRNET(3)"
else
  echo "note: no man(1): the pages were not rendered (install man-db)"
fi

echo "install test: $((checks - fails)) of $checks checks passed"
[ $fails -eq 0 ]
