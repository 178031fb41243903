package main

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/fencegate/fencegate/lease/boltstore"
	"github.com/fencegate/fencegate/lease/server"
	"github.com/fencegate/fencegate/protocol"
)

// Attack (issue 17a, controller online backup and I1): the restore
// safety net — "the copy is marked as a backup: the controller refuses to
// serve it until epoch-bump has raised its epoch" (docs/operations.md) —
// is applied by the `controller backup` command on the client side
// (boltstore.MarkRestorePending after the fetch). The endpoint itself,
// GET /v1/backup (documented in lease/httpapi and docs/operations.md),
// streams an unmarked plain store file. An operator who fetches the copy
// with curl (or any HTTP client, or `agent`-style tooling) and restores it
// gets a controller that starts without epoch-bump and mints, in the same
// epoch, a token at a position it already handed out after the backup:
// not strictly greater than every earlier one (I1), and, for agents that
// saw the lost token, a "same position, another lease" conflict.
//
// Fails on the current code: the controller serves the restored copy and
// its next token is not above the one minted after the backup.
func TestAttack17RawBackupCopyServesWithoutEpochBump(t *testing.T) {
	dir := t.TempDir()
	data, key := filepath.Join(dir, "data"), filepath.Join(dir, "k.key")
	p := startChild(t, "--data-dir", data, "--key", key, "--generate-key", "--http", "127.0.0.1:0")
	before := acquireHTTP(t, p.url, "plant", "sup-a", "r1")
	if r, err := post(http.DefaultClient, p.url+"/v1/leases/plant/release", protocol.Request{Token: before.Raw}); err != nil || !r.OK {
		t.Fatalf("release: %+v %v", r, err)
	}

	resp, err := http.Get(p.url + "/v1/backup") // loopback client: served
	if err != nil {
		t.Fatal(err)
	}
	copyBytes, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(copyBytes) == 0 {
		t.Fatalf("GET /v1/backup: %d, %d bytes, %v", resp.StatusCode, len(copyBytes), err)
	}
	after := acquireHTTP(t, p.url, "plant", "sup-b", "r2") // granted after the backup: a lost token
	if err := p.kill(t, syscall.SIGTERM); err != nil {
		t.Fatalf("controller exit: %v", err)
	}

	restored := filepath.Join(dir, "restored")
	if err := os.MkdirAll(restored, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(server.StorePath(restored), copyBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	// No epoch-bump. A marked copy is refused here (the safety net holds).
	if s, err := boltstore.Open(server.StorePath(restored), boltstore.Options{}); errors.Is(err, boltstore.ErrRestorePending) {
		return
	} else if err != nil {
		t.Fatal(err)
	} else {
		s.Close()
	}
	p2 := startChild(t, "--data-dir", restored, "--key", key, "--http", "127.0.0.1:0")
	next := acquireHTTP(t, p2.url, "plant", "sup-c", "r3")
	if cmp(next, after) <= 0 {
		t.Fatalf("restored controller (copy from GET /v1/backup, no epoch-bump) minted %d.%d for %s, not above %d.%d already "+
			"granted to %s after the backup (I1); the copy carried no restore mark", next.Epoch, next.Seq, next.Holder,
			after.Epoch, after.Seq, after.Holder)
	}
}
