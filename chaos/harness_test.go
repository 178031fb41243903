package chaos

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// buildFencechaos builds cmd/fencechaos with the build tags into dir.
func buildFencechaos(t *testing.T, dir string, tags ...string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH: cannot build cmd/fencechaos for the harness test")
	}
	bin := filepath.Join(dir, "fencechaos")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out, err := exec.Command(goTool, append(args, "github.com/fencegate/fencegate/cmd/fencechaos")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runCampaign runs bin with args and returns its output and exit code.
func runCampaign(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	}
	t.Fatalf("run %s: %v", bin, err)
	return "", -1
}

var lastLine = regexp.MustCompile(`(?m)^(\d+) schedules, (\d+) violations\n?$`)

// The mutation check: an agent built with its fence comparison off
// (persist.MutantNoFence) must make the harness report I2 violations within
// a few schedules, exit 1, and print each failing seed's replay command.
func TestHarnessCatchesAgentWithoutFence(t *testing.T) {
	if testing.Short() {
		t.Skip("runs fault schedules of real processes; not in -short")
	}
	dir := t.TempDir()
	bin := buildFencechaos(t, dir, "fencegate_mutant_nofence")
	out, code := runCampaign(t, bin, "--schedules", "3", "--duration", "8s", "--seed", "100", "--parallel", "2",
		"--out", filepath.Join(dir, "out"))
	if code != ExitViolation {
		t.Fatalf("exit %d, want %d (violation); output:\n%s", code, ExitViolation, out)
	}
	if !strings.Contains(out, "I2: ") {
		t.Fatalf("no I2 violation reported for an agent without its fence; output:\n%s", out)
	}
	if !strings.Contains(out, "replay: fencechaos --schedules 1 --seed ") {
		t.Fatalf("no replay command for the failing seed; output:\n%s", out)
	}
	m := lastLine.FindStringSubmatch(out)
	if m == nil || m[1] != "3" || m[2] == "0" {
		t.Fatalf("last line %q, want \"3 schedules, V violations\" with V > 0; output:\n%s", m, out)
	}
}

// The real agent passes the same schedules: exit 0 and no violation.
func TestHarnessPassesRealAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs fault schedules of real processes; not in -short")
	}
	dir := t.TempDir()
	bin := buildFencechaos(t, dir)
	out, code := runCampaign(t, bin, "--schedules", "3", "--duration", "8s", "--seed", "100", "--parallel", "2",
		"--out", filepath.Join(dir, "out"))
	if code != ExitOK {
		t.Fatalf("exit %d, want 0; output:\n%s", code, out)
	}
	if m := lastLine.FindStringSubmatch(out); m == nil || m[1] != "3" || m[2] != "0" {
		t.Fatalf("last line %q, want \"3 schedules, 0 violations\"; output:\n%s", m, out)
	}
}
