#!/usr/bin/env bash
# A test of one cipher must run that cipher: the job (crlaunch ARGS...,
# run with CRNET_DEBUG=1 added) must exit 0, and every link's "up" line
# must name CIPHER, none another, and at least MIN_LINKS of them appear.
# Without it, a test that forces XChaCha20-Poly1305 (CRNET_NO_AESNI) would
# pass just as well on AES-256-GCM.
#
#   tests/cipher_used.sh CIPHER MIN_LINKS CRLAUNCH [CRLAUNCH ARGS...]
set -uo pipefail
. "$(dirname "$0")/checks.sh"
cipher=$1
min_links=$2
crlaunch=$3
shift 3
err=$(mktemp)
trap 'rm -f "$err"' EXIT
"$crlaunch" -x CRNET_DEBUG=1 "$@" 2>"$err"
status=$?
expect "exit status of the job" "$status" 0
ups=$(grep -c "up (.*, cipher " "$err")
named=$(grep -c "up (.*, cipher $cipher)" "$err")
expect "every link's cipher is $cipher ($ups links)" "$named" "$ups"
if [ "$named" -ge "$min_links" ]; then
  ok "$named links with $cipher, at least $min_links"
else
  fail "$named links with $cipher, want at least $min_links: $(tail -5 "$err")"
fi
echo "$checks checks, $fails failed"
exit $((fails > 0))
