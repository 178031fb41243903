#!/usr/bin/env bash
# firmware/c/sizes.sh — code and RAM of the library (src/: parse, verify,
# fence; not the Ed25519 adapter, the crypto library behind it, or the
# storage port) for Cortex-M0+ and Cortex-M4 with arm-none-eabi-gcc -Os, or
# for the host with gcc -Os when the ARM compiler is not installed
# (apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi).
#
# Printed: text/data/bss per object (arm-none-eabi-size), the stack frame of
# every function (-fstack-usage) and their sum — an upper bound of the
# stack any one call needs, since no function recurses — and the sizes of
# the objects the caller provides (fg_token, fg_fence, fg_key).
set -euo pipefail
cd "$(dirname "$0")"
out=$(mktemp -d "${TMPDIR:-/tmp}/fgsize.XXXXXX")
trap 'rm -rf "$out"' EXIT

# measure NAME CC SIZE NM FLAGS... — compile src/ and tests/sizes.c, print.
measure() {
  local name=$1 cc=$2 size=$3 nm=$4
  shift 4
  mkdir -p "$out/$name"
  for src in src/fg_token.c src/fg_verify.c src/fg_fence.c tests/sizes.c; do
    (cd "$out/$name" && "$cc" "$@" -std=c99 -Os -Wall -Wextra -Werror -pedantic -ffunction-sections \
      -fdata-sections -fstack-usage -I"$OLDPWD/include" -c "$OLDPWD/$src")
  done
  echo "-- $name: code and static data (bytes)"
  (cd "$out/$name" && "$size" -t fg_token.o fg_verify.o fg_fence.o)
  echo "-- $name: stack frames (bytes)"
  sort -t$'\t' -k2 -n -r "$out/$name"/fg_*.su | awk -F'\t' '{ n = split($1, p, ":"); printf "  %-24s %5d %s\n", p[n], $2, $3 }'
  # No function recurses, so a call needs at most the frames along its
  # deepest path of calls; a helper the compiler inlined has no frame of
  # its own (its locals are in the caller's). Paths from the source:
  #   parse:  fg_token_parse > split > envelope | b64_check | b64_decode; > layout; > fields > fg_id_valid
  #   verify: fg_token_verify > (parse) ; > fg_ed25519_verify (the adapter, not counted)
  #   open:   fg_fence_open > load_slot > decode > fg_crc32 | get64 | fg_id_valid; > blank; > adopt
  #   raise:  fg_fence_raise > fg_fence_check > fg_position_compare; > encode > put64 | fg_crc32; > storage write
  awk -F'\t' '{ n = split($1, p, ":"); f[p[n]] = $2 }
    function max3(a, b, c) { return a > b ? (a > c ? a : c) : (b > c ? b : c) }
    END {
      parse = f["fg_token_parse"] + f["split"] + max3(f["envelope"], f["b64_check"] + f["b64_check.constprop"] + f["b64_value"], f["b64_decode"]) \
              + f["layout"] + f["fields"] + f["fg_id_valid"]
      open = f["fg_fence_open"] + f["load_slot"] + f["decode"] + max3(f["fg_crc32"], f["get64"], f["fg_id_valid"]) + f["blank"] + f["adopt"]
      raise = f["fg_fence_raise"] + f["fg_fence_check"] + f["fg_position_compare"] + f["encode"] + f["put64"] + f["fg_crc32"]
      printf "  %-34s %5d\n", "stack bound of fg_token_parse", parse
      printf "  %-34s %5d + the Ed25519 adapter\n", "stack bound of fg_token_verify", f["fg_token_verify"] + parse
      printf "  %-34s %5d\n", "stack bound of fg_fence_open", open
      printf "  %-34s %5d + the storage write\n", "stack bound of fg_fence_raise", raise
    }' "$out/$name"/fg_*.su
  echo "-- $name: objects the caller provides (bytes)"
  "$nm" -S "$out/$name/sizes.o" | while read -r _ size _ sym; do printf '  %-24s %5d\n' "$sym" "$((16#$size))"; done
}

# linked CPU — with MONOCYPHER_DIR set (a Monocypher 4 checkout), the text
# a firmware gains from fg_token_verify with Monocypher's Ed25519, linked
# with --gc-sections, over an empty program.
linked() {
  local cpu=$1 m=$MONOCYPHER_DIR/src
  mkdir -p "$out/linked"
  cat >"$out/linked/app.c" <<'C'
#include "fencegate.h"
static const fg_key keys[1] = {{{1}, {2}}};
static fg_token t;
static char wire[FG_MAX_TOKEN_LEN];
int main(void) { fg_keyring ring = {keys, 1}; return fg_token_verify(&ring, wire, sizeof wire, &t); }
C
  echo 'int main(void) { return 0; }' >"$out/linked/empty.c"
  local f=(-mcpu="$cpu" -mthumb -Os -std=c99 -ffunction-sections -fdata-sections -Wl,--gc-sections --specs=nosys.specs)
  arm-none-eabi-gcc "${f[@]}" -Iinclude -I"$m" -I"$m/optional" "$out/linked/app.c" src/fg_token.c src/fg_verify.c \
    port/fg_ed25519_monocypher.c "$m/monocypher.c" "$m/optional/monocypher-ed25519.c" -o "$out/linked/app.elf"
  arm-none-eabi-gcc "${f[@]}" "$out/linked/empty.c" -o "$out/linked/empty.elf"
  local app empty
  app=$(arm-none-eabi-size "$out/linked/app.elf" | awk 'NR == 2 { print $1 }')
  empty=$(arm-none-eabi-size "$out/linked/empty.elf" | awk 'NR == 2 { print $1 }')
  echo "-- $cpu: fg_token_verify + Monocypher Ed25519, linked: $((app - empty)) bytes of code over an empty program"
}

arm_ok() {
  command -v arm-none-eabi-gcc >/dev/null 2>&1 &&
    echo '#include <string.h>' | arm-none-eabi-gcc -mthumb -mcpu=cortex-m4 -x c -c - -o "$out/probe.o" 2>/dev/null
}

if arm_ok; then
  arm-none-eabi-gcc --version | head -1
  measure cortex-m0plus arm-none-eabi-gcc arm-none-eabi-size arm-none-eabi-nm -mcpu=cortex-m0plus -mthumb
  measure cortex-m4 arm-none-eabi-gcc arm-none-eabi-size arm-none-eabi-nm -mcpu=cortex-m4 -mthumb
  if [ -n "${MONOCYPHER_DIR:-}" ]; then
    linked cortex-m0plus
    linked cortex-m4
  fi
else
  echo "arm-none-eabi-gcc (with newlib) is not installed: host sizes only (apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi)"
  gcc --version | head -1
  measure host gcc size nm
fi
