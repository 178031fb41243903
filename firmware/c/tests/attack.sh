#!/usr/bin/env bash
# firmware/c/tests/attack.sh — builds and runs the attack tests
# (tests/attack_*.c) the way test.sh builds the library's tests: gcc and
# clang with -std=c99 -O2 -Wall -Wextra -Werror -pedantic, then clang with
# AddressSanitizer and UndefinedBehaviorSanitizer (-fno-sanitize-recover).
# Every attack test is expected to fail on the current code (each failing
# check names the invariant it breaks); the script runs all of them and
# exits 1 if any failed, 0 only if every attack held.
#
# usage: firmware/c/tests/attack.sh
set -uo pipefail
cd "$(dirname "$0")/.."

out=$(mktemp -d "${TMPDIR:-/tmp}/fgc-attack.XXXXXX")
trap 'rm -rf "$out"' EXIT

warn=(-std=c99 -Wall -Wextra -Werror -pedantic -Iinclude -Iport -Itests -Iexamples/mqtt-device)
lib=(src/fg_token.c src/fg_verify.c src/fg_fence.c port/fg_ed25519_libsodium.c port/fg_storage_file.c)
device=(examples/mqtt-device/json.c examples/mqtt-device/device.c)
read -r -a sodium <<<"$(pkg-config --cflags --libs libsodium)"
san=(-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)

build() {
  local cc=$1 name=$2
  shift 2
  "$cc" "${warn[@]}" "$@" "${lib[@]}" "${sodium[@]}" -o "$out/$name" || exit 2
}

failed=0
run() {
  local name=$1
  shift
  echo "== $name"
  if "$out/$name" "$@"; then
    echo "-- $name: every attack held"
  else
    echo "-- $name: FAILED (a finding, or a crash under the sanitizers)"
    failed=1
  fi
}

for cc in gcc clang; do
  build "$cc" "attack_fence-$cc" -O2 tests/testutil.c tests/attack_fence.c
  build "$cc" "attack_device-$cc" -O2 tests/testutil.c "${device[@]}" tests/attack_device.c
done
build clang attack_fence-asan "${san[@]}" tests/testutil.c tests/attack_fence.c
build clang attack_device-asan "${san[@]}" tests/testutil.c "${device[@]}" tests/attack_device.c

mkdir -p "$out/scratch"
for v in gcc clang asan; do
  run "attack_fence-$v"
  run "attack_device-$v" testdata "$out/scratch"
done
exit "$failed"
