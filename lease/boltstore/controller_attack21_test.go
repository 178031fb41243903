package boltstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence/fencetest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/protocol"
)

// a21Clock is a lease.Clock that moves only when told (leasetest's
// imports this package). No acquire here waits: After never fires.
type a21Clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *a21Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *a21Clock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

func (c *a21Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// a21Grant is one granted acquire as the test saw it.
type a21Grant struct {
	id    string
	token string
	pos   [2]uint64 // (epoch, seq)
	atMs  int64
	ttlMs uint64
}

// a21Prune is lease.pruneRequests as the test models it: the requests
// the controller must remember once g is granted over kept.
func a21Prune(kept []a21Grant, g a21Grant) []a21Grant {
	next := make([]a21Grant, 0, len(kept)+1)
	for _, q := range append(kept, g) {
		if q.pos == g.pos || g.atMs-q.atMs < int64(q.ttlMs)+lease.RequestSlack.Milliseconds() {
			next = append(next, q)
		}
	}
	return next[max(0, len(next)-lease.MaxRequests):]
}

// TestAttack21ControllerRetriesAcrossRestarts is I1 and idempotent
// acquire through the controller on this store: domains whose names
// neighbour each other in the requests bucket (prefixes, 127/128/129
// characters: the uvarint length's second byte), well over
// lease.MaxRequests grants each, TTLs mixed so that retention drops
// requests from the middle as well as the bottom, and the controller
// restarted on a reopened store, or a crash image of it, every few
// grants. After every restart:
//   - a retry of the last grant's request id answers that grant's token
//     (its lease runs on from the restart);
//   - a retry of any id the controller must still remember answers the
//     same token or expired, never a new grant;
//   - a retry of an id retention dropped is a new grant (a dropped
//     request that came back would answer expired);
//
// and every grant's token is above every earlier one of its domain.
func TestAttack21ControllerRetriesAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 21))
	domains := []string{"a", "a.", "aa", strings.Repeat("a", 127), strings.Repeat("a", 128), strings.Repeat("a", 127) + "b"}
	clock := &a21Clock{now: time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)}
	signer := fencetest.MustSigner(t, 0)
	path := filepath.Join(t.TempDir(), "leases.db")
	st := a21Open(t, path)
	defer func() { st.Close() }()
	newController := func() *lease.Controller {
		c, err := lease.New(ctx, lease.Config{Store: st, Signer: signer, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := newController()
	grants := make([][]a21Grant, len(domains))
	kept := make([][]a21Grant, len(domains)) // what each domain must remember
	rememberedOf := func(i int) map[string]bool {
		m := map[string]bool{}
		for _, q := range kept[i] {
			m[q.id] = true
		}
		return m
	}
	acquire := func(i int, id string, ttl uint64) protocol.Response {
		return c.Do(ctx, protocol.OpAcquire, domains[i], protocol.Request{RequestID: id, Holder: "h", TTLms: ttl})
	}
	record := func(i int, id string, ttl uint64, resp protocol.Response) {
		t.Helper()
		tok, err := c.VerifyToken(resp.Token)
		if !resp.OK || resp.Code != protocol.CodeGranted || err != nil {
			t.Fatalf("domain %q: acquire %s: %+v %v", domains[i], id, resp, err)
		}
		g := a21Grant{id: id, token: resp.Token, pos: [2]uint64{tok.Epoch, tok.Seq}, atMs: clock.Now().UnixMilli(), ttlMs: ttl}
		if n := len(grants[i]); n > 0 && !after(g.pos, grants[i][n-1].pos) {
			t.Fatalf("domain %q: I1: token %v after %v", domains[i], g.pos, grants[i][n-1].pos)
		}
		grants[i] = append(grants[i], g)
		kept[i] = a21Prune(kept[i], g)
	}
	var sameToken, expired, regranted, maxRemembered int
	for step := range 3000 {
		i := rng.IntN(len(domains))
		ttl := []uint64{100, 1000, 600_000, 3_600_000, 3_600_000}[rng.IntN(5)]
		id := fmt.Sprintf("req-%d", step)
		record(i, id, ttl, acquire(i, id, ttl))
		clock.Advance(time.Duration(rng.IntN(200)) * time.Millisecond)
		if rng.IntN(10) == 0 {
			if resp := c.Do(ctx, protocol.OpRelease, domains[i], protocol.Request{Token: grants[i][len(grants[i])-1].token}); !resp.OK {
				t.Fatalf("release: %+v", resp)
			}
		}
		if rng.IntN(25) != 0 {
			continue
		}
		if rng.IntN(2) == 0 {
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			st = a21Open(t, path)
		} else {
			crashed := a21CrashImage(t, path)
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			path, st = crashed, a21Open(t, crashed)
		}
		c = newController()
		for j, gs := range grants {
			if len(gs) == 0 {
				continue
			}
			remembered := rememberedOf(j)
			maxRemembered = max(maxRemembered, len(remembered))
			last := gs[len(gs)-1]
			released := false
			if rec, err := st.Load(ctx, domains[j]); err != nil || rec.Seq != last.pos[1] {
				t.Fatalf("step %d: domain %q: stored %+v %v, last grant %v", step, domains[j], rec, err, last.pos)
			} else {
				released = rec.Lease == nil
			}
			resp := acquire(j, last.id, last.ttlMs)
			switch {
			case released && resp.Code != protocol.CodeExpired:
				t.Fatalf("step %d: domain %q: retry of the released grant %s after a restart: %+v, want expired", step, domains[j], last.id, resp)
			case !released && (resp.Code != protocol.CodeGranted || resp.Token != last.token):
				t.Fatalf("step %d: domain %q: retry of the live grant %s after a restart: %+v, want its token back", step, domains[j], last.id, resp)
			case !released:
				sameToken++
			}
			for range 3 {
				g := gs[rng.IntN(len(gs))]
				if g.id == last.id {
					continue
				}
				// (An id that retention dropped and a retry below granted
				// anew is in gs twice; at most one of them is remembered.)
				resp := acquire(j, g.id, g.ttlMs)
				cur := grants[j][len(grants[j])-1]
				switch {
				case remembered[g.id] && resp.Code == protocol.CodeExpired:
					expired++
				case remembered[g.id] && cur.id == g.id && resp.Code == protocol.CodeGranted && resp.Token == cur.token:
					// a forgotten id granted anew in this loop is the live lease
				case remembered[g.id]:
					t.Fatalf("step %d: domain %q: retry of remembered request %s (token %v): %+v, want expired", step, domains[j], g.id, g.pos, resp)
				case resp.Code == protocol.CodeGranted && resp.Token != g.token:
					record(j, g.id, g.ttlMs, resp) // a forgotten request: a new grant
					regranted++
					gs = grants[j]
					remembered = rememberedOf(j)
				default:
					t.Fatalf("step %d: domain %q: retry of request %s that retention dropped: %+v, want a new grant", step, domains[j], g.id, resp)
				}
			}
		}
	}
	t.Logf("%d live retries, %d expired retries, %d retries of forgotten requests, up to %d remembered", sameToken, expired, regranted, maxRemembered)
	if sameToken < 100 || expired < 50 || regranted < 20 || maxRemembered < lease.MaxRequests {
		t.Fatalf("too few retries checked")
	}
	for i, gs := range grants {
		if len(gs) <= lease.MaxRequests {
			t.Fatalf("domain %q: only %d grants", domains[i], len(gs))
		}
	}
}
