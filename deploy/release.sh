#!/usr/bin/env bash
# Builds fencegate's release: stripped static binaries (CGO_ENABLED=0,
# -trimpath, -ldflags "-s -w") of the operator's commands for linux/amd64,
# linux/arm64 and linux/arm (GOARM=7), one tar.gz per target with the
# systemd units, and SHA256SUMS over the archives. docs/operations.md,
# "Releases", "Installing on an ARM gateway".
#
#   deploy/release.sh [OUT_DIR]          (default dist/)
#   VERSION=v1.2.0 deploy/release.sh     (default: git describe)
#   TARGETS="linux/arm/7" deploy/release.sh
#
# The version and revision are linked into internal/buildinfo, so
# --version and fencegate_build_info name them even where the go command
# stamps no VCS data. Each binary is checked afterwards: its build
# information must say CGO_ENABLED=0 and the target's GOARCH (and GOARM).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-dist}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
targets=${TARGETS:-linux/amd64 linux/arm64 linux/arm/7}
# fencechaos, the fault harness, is a development tool (FUSE, root) and is
# not released: go-fuse does not build for 32-bit ARM.
commands="agent controller fencectl fencebench"
pkg=github.com/fencegate/fencegate/internal/buildinfo
ldflags="-s -w -X $pkg.version=$version -X $pkg.revision=$revision"

rm -rf "$out"
mkdir -p "$out"
for t in $targets; do
  IFS=/ read -r goos goarch goarm <<<"$t"
  name=fencegate-$version-$goos-$goarch${goarm:+v$goarm}
  dir=$out/$name
  mkdir -p "$dir/systemd"
  echo "== $name"
  for c in $commands; do
    CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch GOARM=$goarm \
      go build -trimpath -ldflags "$ldflags" -o "$dir/$c" "./cmd/$c"
    info=$(go version -m "$dir/$c")
    for want in "CGO_ENABLED=0" "GOARCH=$goarch" ${goarm:+"GOARM=$goarm"} "-trimpath=true"; do
      grep -q -- "$want" <<<"$info" || { echo "release: $dir/$c: build info lacks $want" >&2; exit 1; }
    done
  done
  cp deploy/systemd/* "$dir/systemd/"
  cp examples/agent.yaml "$dir/"
  tar -C "$out" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -czf "$out/$name.tar.gz" "$name"
done
(cd "$out" && sha256sum -- *.tar.gz >SHA256SUMS && sha256sum --check --quiet SHA256SUMS)
echo "release $version ($revision) in $out:"
cat "$out/SHA256SUMS"
