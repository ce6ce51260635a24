#!/usr/bin/env bash
# The layers, checked from what the build made (docs/ARCHITECTURE.md):
#   - the runtime uses no symbol the schedules or the collectives define;
#   - the schedules use none the runtime or the collectives define;
#   - base uses none of any layer above it;
#   - crsched, built on the schedules library alone, needs neither libuv
#     nor libsodium.
# The include directories (meson.build) already keep each layer's headers
# out of reach of the others; this holds the calls, which a declaration
# written by hand would get past the compiler.
#
# usage: test_layers.sh BUILD_DIR
set -euo pipefail

build=${1:?usage: test_layers.sh BUILD_DIR}
lib() { echo "$build/src/libcrnet_$1.a"; }
for l in base schedules kernels runtime collectives; do
  [ -f "$(lib "$l")" ] || { echo "FAIL: $(lib "$l") not built"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Global symbols defined by the objects of archives/objects $@.
defined() { nm -g --defined-only "$@" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u; }
# Undefined symbols of each object: "object symbol" lines.
undefined_by_object() {
  nm -A -u "$@" 2>/dev/null | sed -E 's/^([^ ]*): +U /\1 /' | sort -u
}

failures=0
# check NAME "its archives" "archives it must not call"
check() {
  local name=$1 own=$2 forbidden=$3
  # shellcheck disable=SC2086
  defined $forbidden > "$tmp/forbidden"
  if [ ! -s "$tmp/forbidden" ]; then
    echo "FAIL: $name: the forbidden layers define no symbol (nm broken?)"
    failures=$((failures + 1))
    return
  fi
  # shellcheck disable=SC2086
  undefined_by_object $own | awk 'NR == FNR { bad[$1] = 1; next } ($2 in bad)' \
    "$tmp/forbidden" - > "$tmp/uses"
  if [ -s "$tmp/uses" ]; then
    echo "FAIL: $name calls into a layer above or beside it:"
    sed 's/^/  /' "$tmp/uses"
    failures=$((failures + 1))
  else
    echo "ok: $name uses no symbol of: $forbidden" | sed "s|$build/src/||g"
  fi
}

# The check must be able to fail: an object that calls crnet__select (the
# schedules') is caught when taken for the runtime's (check runs in a
# subshell here, so its count stays there).
cat > "$tmp/offender.c" <<'C'
int crnet__select(void);
int offender(void) { return crnet__select(); }
C
cc -c -o "$tmp/offender.o" "$tmp/offender.c"
if check "a planted offender" "$tmp/offender.o" "$(lib schedules)" \
  | grep -q "^FAIL: a planted offender calls into"; then
  echo "ok: a planted call across the layers is caught"
else
  echo "FAIL: a planted call across the layers went unnoticed"
  failures=$((failures + 1))
fi

check runtime "$(lib runtime)" "$(lib schedules) $(lib kernels) $(lib collectives)"
check schedules "$(lib schedules) $(lib kernels)" "$(lib runtime) $(lib collectives)"
check base "$(lib base)" \
  "$(lib schedules) $(lib kernels) $(lib runtime) $(lib collectives)"

crsched=$build/tools/crsched
if [ -x "$crsched" ]; then
  needed=$(readelf -d "$crsched" | awk '/NEEDED/ { print $NF }')
  if echo "$needed" | grep -Eq 'libuv|libsodium|libcrnet'; then
    echo "FAIL: crsched (the schedules library alone) needs: $needed"
    failures=$((failures + 1))
  else
    echo "ok: crsched links the schedules without libuv, libsodium or libcrnet"
  fi
else
  echo "FAIL: $crsched not built"
  failures=$((failures + 1))
fi
[ "$failures" -eq 0 ]
