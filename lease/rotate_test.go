package lease_test

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/protocol"
)

// TestRotationKeepsLeases: a controller restarted with a new key and the
// old one trusted renews the old key's lease by re-signing the same lease
// with the new key (announced), still accepts the old token for it, and
// releases it; without the old key trusted the same renewal is refused as
// an unknown key.
func TestRotationKeepsLeases(t *testing.T) {
	ctx := context.Background()
	oldSigner, _ := leasetest.MustSigner(t)
	c1, st, _ := leasetest.MustController(t, lease.Config{Signer: oldSigner})
	granted := c1.Do(ctx, protocol.OpAcquire, "press", protocol.Request{RequestID: "r1", Holder: "sup-a", TTLms: 60000})
	if !granted.OK {
		t.Fatalf("acquire: %+v", granted)
	}
	old, _ := fence.ParseUnverified(granted.Token)
	newSigner, _ := leasetest.MustSigner(t)

	untrusting, _ := leasetest.MustControllerOn(t, lease.Config{Signer: newSigner}, st)
	r := untrusting.Do(ctx, protocol.OpRenew, "press", protocol.Request{Token: old.Raw})
	if r.Code != protocol.CodeBadRequest || !strings.Contains(r.Message, "unknown key id") {
		t.Fatalf("renew without the old key trusted: %+v, want bad_request unknown key id", r)
	}

	var announced []fence.Token
	c2, _ := leasetest.MustControllerOn(t, lease.Config{Signer: newSigner, Trusted: []ed25519.PublicKey{oldSigner.Public()},
		OnGrant: func(t fence.Token) { announced = append(announced, t) }}, st)
	r = c2.Do(ctx, protocol.OpRenew, "press", protocol.Request{Token: old.Raw})
	if r.Code != protocol.CodeRenewed {
		t.Fatalf("renew of the old key's lease: %+v", r)
	}
	resigned, err := fence.ParseUnverified(r.Token)
	if err != nil {
		t.Fatal(err)
	}
	if resigned.KeyID != newSigner.KeyID() || !resigned.SameLease(old) || resigned.Raw == old.Raw {
		t.Fatalf("renewed token %+v: want the same lease as %+v signed by %s", resigned, old, newSigner.KeyID())
	}
	if len(announced) != 1 || announced[0].Raw != resigned.Raw {
		t.Fatalf("announced %v, want the re-signed token once", announced)
	}
	if r := c2.Do(ctx, protocol.OpRenew, "press", protocol.Request{Token: old.Raw}); r.Code != protocol.CodeRenewed || r.Token != resigned.Raw {
		t.Fatalf("renew with the old token after re-signing: %+v, want renewed with the re-signed token", r)
	}
	if r := c2.Do(ctx, protocol.OpRenew, "press", protocol.Request{Token: resigned.Raw}); r.Code != protocol.CodeRenewed || len(announced) != 1 {
		t.Fatalf("renew with the new token: %+v (announced %d)", r, len(announced))
	}
	if r := c2.Do(ctx, protocol.OpAcquire, "press", protocol.Request{RequestID: "r2", Holder: "sup-b", TTLms: 60000}); r.Code != protocol.CodeHeld {
		t.Fatalf("another holder's acquire during the rotation: %+v, want held", r)
	}
	if r := c2.Do(ctx, protocol.OpRelease, "press", protocol.Request{Token: old.Raw}); r.Code != protocol.CodeReleased {
		t.Fatalf("release with the old token: %+v", r)
	}
	next := c2.Do(ctx, protocol.OpAcquire, "press", protocol.Request{RequestID: "r3", Holder: "sup-b", TTLms: 60000})
	nt, err := fence.ParseUnverified(next.Token)
	if err != nil || nt.KeyID != newSigner.KeyID() || fence.ComparePosition(nt.Epoch, nt.Seq, old.Epoch, old.Seq) <= 0 {
		t.Fatalf("next grant %+v (%v): want a newer token signed with the new key", nt, err)
	}
}
