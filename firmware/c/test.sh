#!/usr/bin/env bash
# firmware/c/test.sh — builds the fencegate C library, its tests and the
# reference MQTT device with gcc and clang (-std=c99 -O2 -Wall -Wextra
# -Werror -pedantic) and runs the tests: the Go vectors of testdata/, the
# fence storage under power cuts, a bounded random mutation loop, the same
# under ASan and UBSan, and libFuzzer (bounded). Last it measures the
# library's code and RAM for Cortex-M (arm-none-eabi-gcc) or, without that
# compiler, for the host.
#
# Needs (Debian): gcc clang libclang-rt-14-dev (clang's sanitizer and
# libFuzzer runtimes, only recommended by clang) pkg-config libsodium-dev
# libmosquitto-dev;
# optional: gcc-arm-none-eabi libnewlib-arm-none-eabi (the Cortex-M sizes).
# Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")"

out=$(mktemp -d "${TMPDIR:-/tmp}/fgc.XXXXXX")
trap 'rm -rf "$out"' EXIT

for tool in gcc clang pkg-config; do
  command -v "$tool" >/dev/null || { echo "test.sh: $tool is missing (apt-get install $tool)"; exit 1; }
done
for lib in libsodium libmosquitto; do
  pkg-config --exists "$lib" || { echo "test.sh: $lib is missing (apt-get install $lib-dev)"; exit 1; }
done

warn=(-std=c99 -Wall -Wextra -Werror -pedantic -Iinclude -Iport -Itests -Iexamples/mqtt-device)
lib=(src/fg_token.c src/fg_verify.c src/fg_fence.c port/fg_ed25519_libsodium.c port/fg_storage_file.c)
device=(examples/mqtt-device/json.c examples/mqtt-device/device.c examples/mqtt-device/fgdevice.c)
read -r -a sodium <<<"$(pkg-config --cflags --libs libsodium)"
read -r -a mosquitto <<<"$(pkg-config --cflags --libs libmosquitto)"

# build CC NAME FLAGS... SOURCES... — one program from the library and sources.
build() {
  local cc=$1 name=$2
  shift 2
  "$cc" "${warn[@]}" "$@" "${lib[@]}" "${sodium[@]}" -o "$out/$name"
}

for cc in gcc clang; do
  echo "== $cc: build (-O2 -Wall -Wextra -Werror -pedantic)"
  build "$cc" "test_vectors-$cc" -O2 tests/testutil.c tests/test_vectors.c
  build "$cc" "test_fence-$cc" -O2 tests/testutil.c tests/test_fence.c
  build "$cc" "fuzz_parse-$cc" -O2 tests/testutil.c tests/fuzz_parse.c
  build "$cc" "oracle-$cc" -O2 tests/testutil.c tests/oracle.c
  build "$cc" "fgdevice-$cc" -O2 "${device[@]}" "${mosquitto[@]}"
  echo "== $cc: Go vectors (testdata/)"
  "$out/test_vectors-$cc" testdata
  echo "== $cc: fence storage"
  mkdir -p "$out/scratch-$cc"
  "$out/test_fence-$cc" "$out/scratch-$cc"
  echo "== $cc: random mutations of the Go-signed tokens"
  "$out/fuzz_parse-$cc" testdata 100000 1
done

echo "== clang: AddressSanitizer + UndefinedBehaviorSanitizer"
if ! echo 'int main(void) { return 0; }' | clang -x c -fsanitize=address,undefined,fuzzer-no-link - -o "$out/probe" 2>/dev/null; then
  echo "test.sh: clang's sanitizer runtimes are missing (apt-get install libclang-rt-dev, e.g. libclang-rt-14-dev)"
  exit 1
fi
san=(-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
build clang test_vectors-asan "${san[@]}" tests/testutil.c tests/test_vectors.c
build clang test_fence-asan "${san[@]}" tests/testutil.c tests/test_fence.c
build clang fuzz_parse-asan "${san[@]}" tests/testutil.c tests/fuzz_parse.c
"$out/test_vectors-asan" testdata
mkdir -p "$out/scratch-asan"
"$out/test_fence-asan" "$out/scratch-asan"
"$out/fuzz_parse-asan" testdata 50000 2

echo "== clang: libFuzzer (bounded: 100000 runs)"
build clang fuzz_parse-libfuzzer "${san[@]}" -fsanitize=fuzzer -DFG_LIBFUZZER tests/testutil.c tests/fuzz_parse.c
mkdir -p "$out/corpus"
awk '$1 == "tok" && $3 != "-" { print $3 }' testdata/tokens.txt | while read -r h; do
  perl -e 'print pack("H*", $ARGV[0])' "$h" >"$out/corpus/$(printf '%s' "$h" | sha1sum | cut -c1-16)"
done
FG_TESTDATA=testdata "$out/fuzz_parse-libfuzzer" -runs=100000 -max_len=1100 -seed=1 "$out/corpus" 2>"$out/libfuzzer.log" ||
  { tail -30 "$out/libfuzzer.log"; exit 1; }
tail -1 "$out/libfuzzer.log"
echo "libFuzzer: 100000 passed, 0 failed"

echo "== sizes"
./sizes.sh
