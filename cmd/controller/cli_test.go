package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/lease/boltstore"
	"github.com/fencegate/fencegate/lease/server"
)

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	if err := run(context.Background(), command{name: "keygen", dir: dir}, io.Discard); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "controller.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("controller.key: %v %v, want mode 0600", fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "controller.pub")); err != nil {
		t.Fatal(err)
	}
	if err := keygen(dir, false, io.Discard); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second keygen: %v, want a refusal naming --force", err)
	}
}

func TestServeNeedsKey(t *testing.T) {
	dir := t.TempDir()
	cmd, err := parseArgs([]string{"--data-dir", dir, "--key", filepath.Join(dir, "c.key"), "--http", "127.0.0.1:0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), cmd, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--generate-key") {
		t.Fatalf("start without key: %v", err)
	}
	cmd.cfg.GenerateKey = true
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // start, then stop at once: a clean exit
	if err := run(ctx, cmd, io.Discard); err != nil {
		t.Fatalf("start with --generate-key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "c.pub")); err != nil {
		t.Fatal(err)
	}
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, yaml string
		flags      []string
		wantErr    string
		check      func(server.Config) bool
	}{
		{name: "unknown key", yaml: "data_dir: x\nmqtt:\n  brokr: tcp://x:1\n", wantErr: "brokr"},
		{name: "bad level", yaml: "data_dir: x\nkey: k\nhttp: :1\nlog_level: loud\n", wantErr: "log_level"},
		{name: "bad broker", yaml: "data_dir: x\nkey: k\nmqtt:\n  broker: http://x:1\n", wantErr: "mqtt.broker"},
		{name: "nothing to serve", yaml: "data_dir: x\nkey: k\n", wantErr: "nothing to serve"},
		{name: "bad domain pattern", yaml: "data_dir: x\nkey: k\nhttp: :1\ndomains: [press-*, \"line[\"]\n", wantErr: `domains (--domains): lease: invalid config: domain pattern 1 "line["`},
		{name: "negative max domains", yaml: "data_dir: x\nkey: k\nhttp: :1\nmax_domains: -1\n", wantErr: "max_domains (--max-domains): -1"},
		{name: "domains", yaml: "data_dir: x\nkey: k\nhttp: :1\ndomains: [press-*]\nmax_domains: 50\nepoch: 7\n",
			flags: []string{"--domains", "a*,b*"},
			check: func(c server.Config) bool {
				return len(c.Domains) == 2 && c.Domains[1] == "b*" && c.MaxDomains == 50 && c.Epoch == 7
			}},
		{name: "reply prefix with wildcard", yaml: "data_dir: x\nkey: k\nmqtt:\n  broker: tcp://x:1\n  reply_prefixes: [ok/, bad/#]\n",
			wantErr: `mqtt.reply_prefixes[1] (--mqtt-reply-prefix): lease: invalid config: reply prefix "bad/#"`},
		{name: "reply prefixes", yaml: "data_dir: x\nkey: k\nmqtt:\n  broker: tcp://x:1\n  reply_prefixes: [site/replies/]\n",
			flags: []string{"--mqtt-reply-prefix", "a/", "--mqtt-reply-prefix", "b/"},
			check: func(c server.Config) bool {
				return c.MQTT.Broker == "tcp://x:1" && len(c.MQTT.ReplyPrefixes) == 2 && c.MQTT.ReplyPrefixes[1] == "b/"
			}},
		{name: "flags override", yaml: "data_dir: x\nkey: k\nhttp: 127.0.0.1:1\nmqtt:\n  keep_alive: 5s\n",
			flags: []string{"--http", "127.0.0.1:2"},
			check: func(c server.Config) bool {
				return c.HTTP == "127.0.0.1:2" && c.DataDir == "x" && c.MQTT.KeepAlive.Seconds() == 5
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd, err := parseArgs(append([]string{"--config", write(tc.yaml)}, tc.flags...), io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want it to name %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(cmd.cfg) {
				t.Fatalf("%+v %v", cmd.cfg, err)
			}
		})
	}
}

func TestEpochBumpCommand(t *testing.T) {
	dir := t.TempDir()
	if err := epochBump(dir, time.Now(), io.Discard); err == nil {
		t.Fatal("bump without a store succeeded")
	}
	cmd, err := parseArgs([]string{"--data-dir", dir, "--key", filepath.Join(dir, "k.key"), "--generate-key", "--http", "127.0.0.1:0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := run(ctx, cmd, io.Discard); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := run(context.Background(), command{name: "epoch-bump", dir: dir}, &out); err != nil || !strings.Contains(out.String(), "raised") {
		t.Fatalf("bump: %v %q", err, out.String())
	}
}

// TestEpochFlag (issue 11 item 9): --epoch gives a new store its epoch
// instead of the clock's; epoch-bump --epoch raises it to at least that.
func TestEpochFlag(t *testing.T) {
	dir := t.TempDir()
	cmd, err := parseArgs([]string{"--data-dir", dir, "--key", filepath.Join(dir, "k.key"), "--generate-key", "--http", "127.0.0.1:0", "--epoch", "1234"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := run(ctx, cmd, io.Discard); err != nil {
		t.Fatal(err)
	}
	if e := storeEpoch(t, dir); e != 1234 {
		t.Fatalf("epoch of the new store %d, want 1234", e)
	}
	far := uint64(time.Now().Add(100 * 24 * time.Hour).UnixMilli())
	bump, err := parseArgs([]string{"epoch-bump", "--data-dir", dir, "--epoch", fmt.Sprint(far)}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), bump, io.Discard); err != nil {
		t.Fatal(err)
	}
	if e := storeEpoch(t, dir); e != far {
		t.Fatalf("epoch after epoch-bump --epoch %d: %d", far, e)
	}
}

func storeEpoch(t *testing.T, dir string) uint64 {
	t.Helper()
	st, err := boltstore.Open(server.StorePath(dir), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, _ := st.Epoch(context.Background())
	return e
}
