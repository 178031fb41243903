package etcdtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/etcdstore"
	"github.com/fencegate/fencegate/lease/leasetest"
)

// TestRestoreWithEpochBump exercises the documented restore procedure:
// snapshot, more grants, controllers stopped, cluster restored from the
// snapshot (revisions go back), epoch bumped, controllers started. Every
// new token is greater than every token granted before the restore, though
// the restored seq is behind; a controller left running on the old epoch
// can write nothing.
func TestRestoreWithEpochBump(t *testing.T) {
	ctx := context.Background()
	c := StartCluster(t, 3)
	signer, keys := leasetest.MustSigner(t)
	open := opener(c)
	st := open(t)
	ctrl, _ := leasetest.MustControllerOn(t, lease.Config{Signer: signer}, st)
	var before []fence.Token
	grantN := func(ctrl *lease.Controller, n int) {
		for range n {
			r := ctrl.Do(ctx, lease.OpAcquire, "d", lease.Request{RequestID: leasetest.ID(), Holder: "alice", TTLms: 1000})
			before = append(before, leasetest.Verified(t, leasetest.Env{Keys: keys}, r))
		}
	}
	grantN(ctrl, 3)
	snap := c.Snapshot(ctx, c.Client(t), t.TempDir())
	grantN(ctrl, 5) // lost by the restore
	st.Close()

	c.Restore(snap, 0)
	stale := open(t) // opened before the bump: a replica that was not stopped
	defer stale.Close()
	if rec, err := stale.Load(ctx, "d"); err != nil || rec.Seq != 3 {
		t.Fatalf("restored record: seq %d, %v; want 3 (the snapshot's)", rec.Seq, err)
	}
	old, bumped, err := etcdstore.BumpEpoch(ctx, c.Client(t), stale.(*etcdstore.Store).Prefix(), time.Now())
	if err != nil || bumped <= old {
		t.Fatalf("bump: %d → %d, %v", old, bumped, err)
	}
	staleCtrl, _ := leasetest.MustControllerOn(t, lease.Config{Signer: signer}, stale)
	if r := staleCtrl.Do(ctx, lease.OpAcquire, "e", lease.Request{RequestID: leasetest.ID(), Holder: "bob", TTLms: 1000}); r.Code != lease.CodeInternal {
		t.Fatalf("acquire through a store opened before the bump: %+v, want internal", r)
	}
	if !errors.Is(stale.(*etcdstore.Store).Err(), etcdstore.ErrEpochChanged) {
		t.Fatalf("stale store Err: %v, want ErrEpochChanged", stale.(*etcdstore.Store).Err())
	}

	st = open(t)
	defer st.Close()
	ctrl, _ = leasetest.MustControllerOn(t, lease.Config{Signer: signer}, st)
	for range 3 {
		r := ctrl.Do(ctx, lease.OpAcquire, "d", lease.Request{RequestID: leasetest.ID(), Holder: "alice", TTLms: 1000}) // the restored lease is alice's, still honoured
		tok := leasetest.Verified(t, leasetest.Env{Keys: keys}, r)
		for _, b := range before {
			leasetest.Newer(t, b, tok)
		}
		if tok.Epoch != bumped || tok.Seq > 6 {
			t.Fatalf("token after restore %d/%d: want epoch %d and the restored seq continuing", tok.Epoch, tok.Seq, bumped)
		}
	}
}
