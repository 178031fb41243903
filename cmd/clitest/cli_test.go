package clitest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// binaries are the commands under cmd/ an operator runs.
var binaries = []string{"agent", "controller", "fencectl", "fencebench", "fencechaos"}

// Link-time build information the test builds with, so --version has a
// known answer (the go command stamps no VCS revision in a git worktree or
// with -buildvcs=false).
const (
	testVersion  = "v0.0.0-clitest"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fencegate-clitest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := 1
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles every binary into dir, as the README says to.
func build(dir string) error {
	pkg := "github.com/fencegate/fencegate/internal/buildinfo"
	ld := fmt.Sprintf("-X %s.version=%s -X %s.revision=%s", pkg, testVersion, pkg, testRevision)
	cmd := exec.Command("go", "build", "-ldflags", ld, "-o", dir+string(filepath.Separator), "./cmd/...")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/...: %w\n%s", err, out)
	}
	return nil
}

// runBin runs a built binary and returns its stdout, stderr and exit code.
func runBin(t *testing.T, name string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=")
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

func TestVersion(t *testing.T) {
	for _, b := range binaries {
		out, errs, code := runBin(t, b, "--version")
		want := fmt.Sprintf("%s %s (revision %s, %s)\n", b, testVersion, testRevision, runtime.Version())
		if code != 0 || out != want {
			t.Errorf("%s --version: exit %d, stdout %q (stderr %q), want exit 0 and %q", b, code, out, errs, want)
		}
	}
}

// TestHelpExitsZero: -h and --help exit 0 for every binary and print a
// usage naming the binary; an unknown flag does not exit 0.
func TestHelpExitsZero(t *testing.T) {
	for _, b := range binaries {
		for _, h := range []string{"-h", "--help"} {
			out, errs, code := runBin(t, b, h)
			if code != 0 || !strings.Contains(out+errs, "usage") && !strings.Contains(out+errs, "Usage") {
				t.Errorf("%s %s: exit %d, output %q", b, h, code, out+errs)
			}
		}
		if _, _, code := runBin(t, b, "--no-such-flag"); code == 0 {
			t.Errorf("%s --no-such-flag: exit 0", b)
		}
	}
}

func TestControllerHelpListsSubcommands(t *testing.T) {
	out, errs, code := runBin(t, "controller", "--help")
	for _, want := range []string{"controller keygen", "controller epoch-bump", "-data-dir", "-version"} {
		if code != 0 || !strings.Contains(out+errs, want) {
			t.Errorf("controller --help: exit %d, lacks %q:\n%s", code, want, out+errs)
		}
	}
	for sub, want := range map[string]string{"keygen": "usage: controller keygen [--dir DIR]", "epoch-bump": "usage: controller epoch-bump --data-dir DIR"} {
		out, errs, code := runBin(t, "controller", sub, "-h")
		if code != 0 || !strings.Contains(out+errs, want) {
			t.Errorf("controller %s -h: exit %d, lacks %q:\n%s", sub, code, want, out+errs)
		}
	}
}

// fencectlSyntax is each fencectl sub-command's positional syntax, as its
// help must show it.
var fencectlSyntax = map[string]string{
	"demo":    "usage: fencectl demo",
	"keygen":  "usage: fencectl keygen",
	"lease":   "usage: fencectl lease acquire|renew|release|get DOMAIN",
	"send":    "usage: fencectl send DEVICE OP [ARGS-JSON] (--token T | --domain D)",
	"watch":   "usage: fencectl watch [DEVICE ...]",
	"devices": "usage: fencectl devices",
	"token":   "usage: fencectl token decode TOKEN",
}

func TestFencectlHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		out, _, code := runBin(t, "fencectl", args...)
		if code != 0 || !strings.Contains(out, "usage: fencectl COMMAND") || !strings.Contains(out, "send DEVICE OP") {
			t.Errorf("fencectl %v: exit %d, stdout %q", args, code, out)
		}
	}
	for cmd, want := range fencectlSyntax {
		out, _, code := runBin(t, "fencectl", "help", cmd)
		if code != 0 || !strings.HasPrefix(out, want) || !strings.Contains(out, "flags:") {
			t.Errorf("fencectl help %s: exit %d, stdout %q, want it to start %q", cmd, code, out, want)
		}
		out, errs, code := runBin(t, "fencectl", cmd, "-h")
		if code != 0 || !strings.Contains(out+errs, want) {
			t.Errorf("fencectl %s -h: exit %d, output %q, want %q", cmd, code, out+errs, want)
		}
	}
	if _, errs, code := runBin(t, "fencectl", "help", "nosuch"); code != 1 || !strings.Contains(errs, `unknown command "nosuch"`) {
		t.Errorf("fencectl help nosuch: exit %d, stderr %q", code, errs)
	}
	if _, _, code := runBin(t, "fencectl"); code != 1 {
		t.Errorf("fencectl without a command: exit %d, want 1", code)
	}
}
