package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/agent"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// startAgent writes a config file and runs the agent from it (broker,
// HTTP on a free port); it returns the config path, the data dir and the
// signer of its trusted key.
func startAgent(t *testing.T, tokenFile string) (string, string, *fence.Signer) {
	t.Helper()
	dir := t.TempDir()
	priv, err := fence.WriteKeyFiles(filepath.Join(dir, "c.key"), filepath.Join(dir, "c.pub"), true)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := fence.NewSigner(priv)
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	data := filepath.Join(dir, "data")
	// Port 0 cannot be used by a second process to find the agent: pick one.
	cfgText := fmt.Sprintf("agent: {id: gw1, data_dir: %s}\nmqtt: {broker: %q}\ntrust: {keys: [%s]}\nhttp: {listen: \"127.0.0.1:%d\", token_file: %q}\ndevices: [{id: pump1, domain: plant, driver: sim}]\n",
		data, b.URL(), filepath.Join(dir, "c.pub"), freePort(t), tokenFile)
	cfgPath := filepath.Join(dir, "agent.yaml")
	os.WriteFile(cfgPath, []byte(cfgText), 0o600)
	cfg, err := agent.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return cfgPath, data, signer
}

func TestBackupOfRunningAgent(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "http.token")
	os.WriteFile(tokFile, []byte("0123456789abcdef-token\n"), 0o600)
	cfgPath, data, _ := startAgent(t, tokFile)
	if _, err := persist.Open(filepath.Join(data, "fence.db"), persist.Options{LockTimeout: 100 * time.Millisecond}); !errors.Is(err, persist.ErrLocked) {
		t.Fatalf("second open of the live store: %v, want ErrLocked (why the backup goes through the agent)", err)
	}
	out := filepath.Join(t.TempDir(), "fence-backup.db")
	var stdout, stderr bytes.Buffer
	if code := runBackup(context.Background(), []string{"--config", cfgPath, "--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("backup exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "wrote "+out) {
		t.Fatalf("backup output: %s", stdout.String())
	}
	if _, err := persist.Inspect(out); err != nil {
		t.Fatalf("the copy: %v", err)
	}
	if code := runBackup(context.Background(), []string{"--config", cfgPath, "--out", out}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "--force") {
		t.Fatalf("backup over an existing file: exit %d, %s", code, stderr.String())
	}
}

func TestBackupRefusesWithoutToken(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "http.token")
	os.WriteFile(tokFile, []byte("0123456789abcdef-token\n"), 0o600)
	cfgPath, _, _ := startAgent(t, tokFile)
	os.WriteFile(tokFile, []byte("another-token-0123456789\n"), 0o600) // the client reads a token the agent does not hold
	out := filepath.Join(t.TempDir(), "x.db")
	var stdout, stderr bytes.Buffer
	if code := runBackup(context.Background(), []string{"--config", cfgPath, "--out", out}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "401") {
		t.Fatalf("backup with a wrong token: exit %d, %s", code, stderr.String())
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("a refused backup left a file")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
