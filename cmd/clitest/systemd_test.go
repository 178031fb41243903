package clitest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const unitDir = "../../deploy/systemd"

// unitLines returns a unit file's "Key=value" lines, comments dropped.
func unitLines(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(unitDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// TestUnitsHarden: both units run the binary as the dedicated user, with a
// state directory, a read-only system, no privilege gain, readiness over
// sd_notify and a restart on failure; the agent's may open serial ports.
func TestUnitsHarden(t *testing.T) {
	common := []string{"Type=notify", "User=fencegate", "ProtectSystem=strict", "NoNewPrivileges=yes", "Restart=on-failure"}
	for unit, extra := range map[string][]string{
		"fencegate-agent.service":      {"StateDirectory=fencegate-agent", "SupplementaryGroups=dialout", "ExecStart=/usr/local/bin/fencegate-agent --config /etc/fencegate/agent.yaml --log-format json"},
		"fencegate-controller.service": {"StateDirectory=fencegate-controller", "ExecStart=/usr/local/bin/fencegate-controller --config /etc/fencegate/controller.yaml"},
	} {
		lines := unitLines(t, unit)
		for _, want := range append(common, extra...) {
			if !contains(lines, want) {
				t.Errorf("%s lacks %q", unit, want)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// TestUnitsVerify runs systemd-analyze verify over the units, with
// ExecStart pointing at the binaries just built; any warning fails. A
// broken copy must draw a warning, so the check is known to bite.
func TestUnitsVerify(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed (apt-get install systemd); .ci/run installs it")
	}
	dir := t.TempDir()
	for _, u := range []string{"agent", "controller"} {
		b, err := os.ReadFile(filepath.Join(unitDir, "fencegate-"+u+".service"))
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte("/usr/local/bin/fencegate-"+u), []byte(filepath.Join(binDir, u)))
		writeFile(t, filepath.Join(dir, "fencegate-"+u+".service"), b)
		if out := verify(t, filepath.Join(dir, "fencegate-"+u+".service")); out != "" {
			t.Errorf("systemd-analyze verify fencegate-%s.service:\n%s", u, out)
		}
		broken := bytes.Replace(b, []byte("ProtectSystem=strict"), []byte("ProtectSystem=stric"), 1)
		writeFile(t, filepath.Join(dir, "broken-"+u+".service"), broken)
		if out := verify(t, filepath.Join(dir, "broken-"+u+".service")); !strings.Contains(out, "protect system") {
			t.Errorf("systemd-analyze verify of a broken unit did not complain: %q", out)
		}
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// verify returns systemd-analyze verify's complaints about unit ("" if none).
func verify(t *testing.T, unit string) string {
	t.Helper()
	out, err := exec.Command("systemd-analyze", "verify", unit).CombinedOutput()
	if err != nil && len(out) == 0 {
		return fmt.Sprintf("systemd-analyze: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestReadyNotification: started as a Type=notify service would be, the
// agent and the controller send READY=1 to $NOTIFY_SOCKET once started.
func TestReadyNotification(t *testing.T) {
	dir := t.TempDir()
	if _, errs, code := runBin(t, "controller", "keygen", "--dir", dir); code != 0 {
		t.Fatalf("controller keygen: exit %d: %s", code, errs)
	}
	agentYAML := fmt.Sprintf(`agent: {id: gw1, data_dir: %s}
mqtt: {listen: "127.0.0.1:0"}
trust: {keys: [%s]}
http: {listen: "off"}
devices:
  - {id: pump1, driver: sim, settings: {ops: [{name: set}]}}
`, filepath.Join(dir, "agent-data"), filepath.Join(dir, "controller.pub"))
	writeFile(t, filepath.Join(dir, "agent.yaml"), []byte(agentYAML))
	for name, args := range map[string][]string{
		"agent":      {"--config", filepath.Join(dir, "agent.yaml")},
		"controller": {"--data-dir", filepath.Join(dir, "ctl"), "--key", filepath.Join(dir, "controller.key"), "--http", "127.0.0.1:0"},
	} {
		if got := awaitReady(t, dir, name, args); got != "READY=1" {
			t.Errorf("%s sent %q to NOTIFY_SOCKET, want READY=1", name, got)
		}
	}
}

// awaitReady starts a binary with NOTIFY_SOCKET set, returns the first
// datagram it sends there, and stops it.
func awaitReady(t *testing.T, dir, name string, args []string) string {
	t.Helper()
	sock := filepath.Join(dir, name+".notify")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, name), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	_ = ln.SetReadDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 256)
	n, _, err := ln.ReadFromUnix(buf)
	if err != nil {
		t.Fatalf("%s: no notification: %v\n%s", name, err, stderr.String())
	}
	return string(buf[:n])
}
