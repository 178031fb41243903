// Package cbuild compiles the C library of firmware/c and its programs for
// Go tests: the vector checker, the oracle, the reference MQTT device. It is
// for tests only (its helpers take a testing.TB and skip or fail the test)
// but an ordinary package, shared by firmware/vectors and firmware/e2e.
//
// A test that needs a C toolchain or library calls Require first: without
// it the test is skipped with a message naming the Debian package to
// install (CI installs them).
package cbuild

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Flags are the warnings every build uses: the library must build clean
// with them under gcc and clang (firmware/c/test.sh builds with both).
var Flags = []string{"-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic"}

// aptPackage names the Debian package that provides a tool or a
// pkg-config library.
var aptPackage = map[string]string{
	"cc": "gcc", "pkg-config": "pkg-config", "libsodium": "libsodium-dev",
	"libmosquitto": "libmosquitto-dev", "mosquitto": "mosquitto",
}

// Dir returns the absolute path of firmware/c.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "c")
}

// Require skips tb unless cc, pkg-config and every pkg-config library in
// libs (e.g. "libsodium", "libmosquitto") are installed.
func Require(tb testing.TB, libs ...string) {
	tb.Helper()
	for _, tool := range []string{"cc", "pkg-config"} {
		if _, err := exec.LookPath(tool); err != nil {
			tb.Skipf("%s is not installed (apt-get install %s); .ci/run installs it", tool, aptPackage[tool])
		}
	}
	for _, lib := range libs {
		if err := exec.Command("pkg-config", "--exists", lib).Run(); err != nil {
			tb.Skipf("pkg-config finds no %s (apt-get install %s); .ci/run installs it", lib, aptPackage[lib])
		}
	}
}

// Library are the library's sources with the Linux ports, relative to Dir.
var Library = []string{"src/fg_token.c", "src/fg_verify.c", "src/fg_fence.c",
	"port/fg_ed25519_libsodium.c", "port/fg_storage_file.c"}

// Build compiles Library and sources (relative to Dir) with Flags, linking
// libs (pkg-config names; libsodium is always linked), into dir/name, and
// returns its path. A compiler error fails tb with the compiler's output.
func Build(tb testing.TB, dir, name string, libs []string, sources ...string) string {
	tb.Helper()
	out := filepath.Join(dir, name)
	args := append([]string(nil), Flags...)
	args = append(args, "-I", filepath.Join(Dir(), "include"), "-I", filepath.Join(Dir(), "port"),
		"-I", filepath.Join(Dir(), "tests"), "-o", out)
	for _, src := range append(append([]string(nil), Library...), sources...) {
		args = append(args, filepath.Join(Dir(), src))
	}
	args = append(args, pkgConfig(tb, append([]string{"libsodium"}, libs...))...)
	if b, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
		tb.Fatalf("cc %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}

func pkgConfig(tb testing.TB, libs []string) []string {
	tb.Helper()
	b, err := exec.Command("pkg-config", append([]string{"--cflags", "--libs"}, libs...)...).Output()
	if err != nil {
		tb.Fatalf("pkg-config %v: %v", libs, err)
	}
	return strings.Fields(string(b))
}
