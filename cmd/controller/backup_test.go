package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease/boltstore"
	"github.com/fencegate/fencegate/lease/server"
	"github.com/fencegate/fencegate/protocol"
)

func acquireHTTP(t *testing.T, url, domain, holder, id string) fence.Token {
	t.Helper()
	r, err := post(http.DefaultClient, url+"/v1/leases/"+domain+"/acquire", protocol.Request{RequestID: id, Holder: holder, TTLms: 60000})
	if err != nil || r.Code != protocol.CodeGranted {
		t.Fatalf("acquire %s for %s: %+v %v", domain, holder, r, err)
	}
	tok, err := fence.ParseUnverified(r.Token)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// The online backup is taken from a running controller process (whose
// bbolt lock keeps any other process out of the file); the copy holds the
// domains, and a restore of it can only serve after epoch-bump, and then
// mints tokens above those minted after the backup (I1).
func TestBackupOfRunningControllerRestores(t *testing.T) {
	dir := t.TempDir()
	data, key := filepath.Join(dir, "data"), filepath.Join(dir, "k.key")
	p := startChild(t, "--data-dir", data, "--key", key, "--generate-key", "--http", "127.0.0.1:0")
	before := acquireHTTP(t, p.url, "plant", "sup-a", "r1")
	if r, err := post(http.DefaultClient, p.url+"/v1/leases/plant/release", protocol.Request{Token: before.Raw}); err != nil || !r.OK {
		t.Fatalf("release: %+v %v", r, err)
	}
	addr := strings.TrimPrefix(p.url, "http://")
	copyPath := filepath.Join(dir, "leases-backup.db")
	cmd, err := parseArgs([]string{"backup", "--http", addr, "--out", copyPath}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := run(context.Background(), cmd, &out); err != nil || !strings.Contains(out.String(), "epoch-bump") {
		t.Fatalf("backup: %v\n%s", err, out.String())
	}
	after := acquireHTTP(t, p.url, "plant", "sup-c", "r3") // the controller still serves
	if err := p.kill(t, syscall.SIGTERM); err != nil {
		t.Fatalf("controller exit: %v", err)
	}

	restored := filepath.Join(dir, "restored")
	os.MkdirAll(restored, 0o700)
	b, _ := os.ReadFile(copyPath)
	os.WriteFile(server.StorePath(restored), b, 0o600)
	if _, err := boltstore.Open(server.StorePath(restored), boltstore.Options{}); !errors.Is(err, boltstore.ErrRestorePending) {
		t.Fatalf("open of an unbumped copy: %v, want ErrRestorePending", err)
	}
	if err := run(context.Background(), command{name: "epoch-bump", dir: restored}, io.Discard); err != nil {
		t.Fatal(err)
	}
	p2 := startChild(t, "--data-dir", restored, "--key", key, "--http", "127.0.0.1:0")
	if r, err := post(http.DefaultClient, p2.url+"/v1/leases/plant/release", protocol.Request{Token: after.Raw}); err != nil || r.OK {
		t.Fatalf("release of a token the copy never saw: %+v %v, want refused", r, err)
	}
	next := acquireHTTP(t, p2.url, "plant", "sup-d", "r4")
	if cmp(next, after) <= 0 || next.Epoch <= before.Epoch {
		t.Fatalf("token after restore %v is not above %v, minted after the backup (I1)", next, after)
	}
	if next.Seq != before.Seq+1 {
		t.Fatalf("restored seq: %d, want %d (the copy holds plant at seq %d)", next.Seq, before.Seq+1, before.Seq)
	}
}

func TestBackupUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no address", []string{"backup", "--out", "x.db"}, "--http or a --config"},
		{"no out", []string{"backup", "--http", "127.0.0.1:1"}, "--out is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseArgs(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
		})
	}
	cmd, _ := parseArgs([]string{"backup", "--http", "127.0.0.1:1", "--out", filepath.Join(t.TempDir(), "x.db")}, io.Discard)
	if err := run(context.Background(), cmd, io.Discard); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("backup from nowhere: %v", err)
	}
}
