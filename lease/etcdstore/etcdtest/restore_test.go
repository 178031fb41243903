package etcdtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/etcdstore"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/protocol"
)

// TestRestoreWithEpochBump exercises the documented restore procedure:
// snapshot, more grants, controllers stopped, cluster restored from the
// snapshot (revisions go back), epoch bumped, controllers started. Every
// new token is greater than every token granted before the restore, though
// the restored seq is behind; a controller left running across the restore
// can write nothing.
func TestRestoreWithEpochBump(t *testing.T) {
	ctx := context.Background()
	c := StartCluster(t, 3)
	signer, keys := leasetest.MustSigner(t)
	open := opener(c)
	st := open(t)
	ctrl, _ := leasetest.MustControllerOn(t, lease.Config{Signer: signer}, st)
	stale := open(t) // a replica that was not stopped
	defer stale.Close()
	staleCtrl, _ := leasetest.MustControllerOn(t, lease.Config{Signer: signer}, stale)
	before := grantN(t, ctrl, keys, 3)
	snap := c.Snapshot(ctx, c.Client(t), t.TempDir())
	before = append(before, grantN(t, ctrl, keys, 5)...) // lost by the restore
	st.Close()

	c.Restore(snap, 0)
	old, bumped, err := etcdstore.BumpEpoch(ctx, c.Client(t), stale.(*etcdstore.Store).Prefix(), time.Now())
	if err != nil || bumped <= old {
		t.Fatalf("bump: %d → %d, %v", old, bumped, err)
	}
	if err := refuseUntilFailed(t, staleCtrl, stale.(*etcdstore.Store), "bob"); !errors.Is(err, etcdstore.ErrRestored) && !errors.Is(err, etcdstore.ErrEpochChanged) {
		t.Fatalf("stale store Err: %v, want ErrRestored or ErrEpochChanged", err)
	}

	st = open(t)
	defer st.Close()
	if rec, err := st.Load(ctx, "d"); err != nil || rec.Seq != 3 {
		t.Fatalf("restored record: seq %d, %v; want 3 (the snapshot's)", rec.Seq, err)
	}
	ctrl, _ = leasetest.MustControllerOn(t, lease.Config{Signer: signer}, st)
	for range 3 {
		r := ctrl.Do(ctx, protocol.OpAcquire, "d", protocol.Request{RequestID: leasetest.ID(), Holder: "alice", TTLms: 1000}) // the restored lease is alice's, still honoured
		tok := leasetest.Verified(t, leasetest.Env{Keys: keys}, r)
		for _, b := range before {
			leasetest.Newer(t, b, tok)
		}
		if tok.Epoch != bumped || tok.Seq > 6 {
			t.Fatalf("token after restore %d/%d: want epoch %d and the restored seq continuing", tok.Epoch, tok.Seq, bumped)
		}
	}
}

// TestRestoreWithoutEpochBumpRefusesGrants: the cluster is restored from a
// snapshot (a new cluster id, revisions back to the snapshot's) and nobody
// runs epoch-bump. Granting again would reissue the seqs granted after the
// snapshot under the same epoch, which agents reject. Instead a store
// opened on the restored cluster refuses to open, a replica that ran
// across the restore refuses to grant, both naming epoch-bump; after the
// bump grants resume above every earlier token.
func TestRestoreWithoutEpochBumpRefusesGrants(t *testing.T) {
	ctx := context.Background()
	c := StartCluster(t, 1)
	signer, keys := leasetest.MustSigner(t)
	open := opener(c)
	runner := open(t).(*etcdstore.Store) // a replica that keeps running across the restore
	defer runner.Close()
	ctrl, _ := leasetest.MustControllerOn(t, lease.Config{Signer: signer}, runner)
	before := grantN(t, ctrl, keys, 3)
	snap := c.Snapshot(ctx, c.Client(t), t.TempDir())
	before = append(before, grantN(t, ctrl, keys, 5)...) // lost by the restore

	c.Restore(snap, 0)
	wantRestoredOpen(t, c, runner.Prefix())
	wantRunnerRefuses(t, ctrl, runner)
	bumpAndGrantAbove(t, c, runner.Prefix(), signer, keys, before)
}

// TestRestoreKeepingClusterIDWithoutBumpRefusesGrants: restored with the
// original cluster token the cluster keeps its id, so only the revision
// going back shows the restore. A replica that ran across it sees that,
// refuses to grant and marks the restored store so that stores opened
// later refuse too, until epoch-bump.
func TestRestoreKeepingClusterIDWithoutBumpRefusesGrants(t *testing.T) {
	ctx := context.Background()
	c := StartCluster(t, 1)
	signer, keys := leasetest.MustSigner(t)
	open := opener(c)
	runner := open(t).(*etcdstore.Store)
	defer runner.Close()
	ctrl, _ := leasetest.MustControllerOn(t, lease.Config{Signer: signer}, runner)
	before := grantN(t, ctrl, keys, 3)
	snap := c.Snapshot(ctx, c.Client(t), t.TempDir())
	before = append(before, grantN(t, ctrl, keys, 5)...)

	c.RestoreKeepingID(snap)
	wantRunnerRefuses(t, ctrl, runner)
	wantRestoredOpen(t, c, runner.Prefix())
	bumpAndGrantAbove(t, c, runner.Prefix(), signer, keys, before)
}

// grantN acquires domain "d" n times as alice and returns the tokens.
func grantN(t *testing.T, ctrl *lease.Controller, keys *fence.KeyRing, n int) []fence.Token {
	t.Helper()
	var toks []fence.Token
	for range n {
		r := ctrl.Do(context.Background(), protocol.OpAcquire, "d", protocol.Request{RequestID: leasetest.ID(), Holder: "alice", TTLms: 1000})
		toks = append(toks, leasetest.Verified(t, leasetest.Env{Keys: keys}, r))
	}
	return toks
}

// wantRestoredOpen: opening the store under prefix fails with ErrRestored,
// and the error tells the operator to run epoch-bump.
func wantRestoredOpen(t *testing.T, c *Cluster, prefix string) {
	t.Helper()
	st, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: c.Endpoints(), Prefix: prefix})
	if err == nil {
		st.Close()
		t.Fatal("store opened on a cluster restored without an epoch bump")
	}
	if !errors.Is(err, etcdstore.ErrRestored) || !strings.Contains(err.Error(), "epoch-bump") {
		t.Fatalf("open after the restore: %v; want ErrRestored naming epoch-bump", err)
	}
}

// wantRunnerRefuses: every acquire through a replica that ran across the
// restore is refused (alice holds the restored lease: a new grant would
// reissue seq 4), and its store ends with ErrRestored naming epoch-bump.
func wantRunnerRefuses(t *testing.T, ctrl *lease.Controller, runner *etcdstore.Store) {
	t.Helper()
	if err := refuseUntilFailed(t, ctrl, runner, "alice"); !errors.Is(err, etcdstore.ErrRestored) || !strings.Contains(err.Error(), "epoch-bump") {
		t.Fatalf("runner Err: %v; want ErrRestored naming epoch-bump", err)
	}
}

// refuseUntilFailed acquires "d" as holder through ctrl until st reports
// an error (its client reconnects to the restored cluster first: a
// generous bound for a loaded machine), failing the test if any acquire is
// answered other than internal, and returns st.Err().
func refuseUntilFailed(t *testing.T, ctrl *lease.Controller, st *etcdstore.Store, holder string) error {
	t.Helper()
	end := time.Now().Add(60 * time.Second)
	for st.Err() == nil && time.Now().Before(end) {
		r := ctrl.Do(context.Background(), protocol.OpAcquire, "d", protocol.Request{RequestID: leasetest.ID(), Holder: holder, TTLms: 1000})
		if r.Code != protocol.CodeInternal {
			t.Fatalf("acquire through a replica that ran across the restore: %+v, want internal", r)
		}
	}
	return st.Err()
}

// bumpAndGrantAbove runs epoch-bump and checks that a store opened then
// grants tokens above every token in before.
func bumpAndGrantAbove(t *testing.T, c *Cluster, prefix string, signer *fence.Signer, keys *fence.KeyRing, before []fence.Token) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := etcdstore.BumpEpoch(ctx, c.Client(t), prefix, time.Now()); err != nil {
		t.Fatalf("bump: %v", err)
	}
	st, err := etcdstore.Open(ctx, etcdstore.Config{Endpoints: c.Endpoints(), Prefix: prefix})
	if err != nil {
		t.Fatalf("open after the bump: %v", err)
	}
	defer st.Close()
	ctrl, _ := leasetest.MustControllerOn(t, lease.Config{Signer: signer}, st)
	for _, tok := range grantN(t, ctrl, keys, 3) {
		for _, b := range before {
			leasetest.Newer(t, b, tok)
		}
	}
}
