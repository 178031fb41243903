package etcdtest

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// Test parameters: leases short enough that hand-overs by expiry happen
// during the test, waits long enough to ride out an etcd election.
const (
	ttl          = 500 * time.Millisecond
	progressWait = 90 * time.Second // hang guard only: a loaded machine is slow
)

// grant is what one supervisor observed of one lease, on the test
// process's monotonic clock, which the controllers share (one process: no
// clock skew; see holds).
type grant struct {
	tok  fence.Token
	sent time.Time // the acquire was sent
	recv time.Time // the grant was received: the holder holds from here
	end  time.Time // the holder stopped holding: see holds
}

// log collects grants from every supervisor.
type log struct {
	mu     sync.Mutex // guards grants
	grants []grant
	n      atomic.Int64
}

func (l *log) add(g grant) {
	l.mu.Lock()
	l.grants = append(l.grants, g)
	l.mu.Unlock()
	l.n.Add(1)
}

// supervisor competes for domain as holder, through the replicas' HTTP
// APIs in turn (the next on a transport error) or through MQTT, until ctx
// ends: acquire (waiting), renew once, release.
type supervisor struct {
	holder, domain string
	do             func(ctx context.Context, op protocol.LeaseOp, req protocol.Request) (protocol.Response, error)
	log            *log
}

func (s *supervisor) run(ctx context.Context) {
	for ctx.Err() == nil {
		req := protocol.Request{RequestID: leasetest.ID(), Holder: s.holder, TTLms: uint64(ttl.Milliseconds()), WaitMs: 1000}
		sent := time.Now()
		r, err := s.do(ctx, protocol.OpAcquire, req)
		if err != nil || r.Code != protocol.CodeGranted {
			continue
		}
		s.hold(ctx, grant{tok: fence.Token{Raw: r.Token}, sent: sent, recv: time.Now()})
	}
}

// hold renews the lease once and releases it, then records it. The
// holder's own view (holds) ends at its last confirmed acquire or renewal
// send time plus the TTL, or at the release it sent, whichever is first.
func (s *supervisor) hold(ctx context.Context, g grant) {
	g.end = g.sent.Add(ttl)
	renewSent := time.Now()
	if r, err := s.do(ctx, protocol.OpRenew, protocol.Request{RequestID: leasetest.ID(), Token: g.tok.Raw}); err == nil && r.Code == protocol.CodeRenewed {
		g.end = renewSent.Add(ttl)
	}
	if released := time.Now(); released.Before(g.end) {
		g.end = released
	}
	s.do(ctx, protocol.OpRelease, protocol.Request{RequestID: leasetest.ID(), Token: g.tok.Raw})
	s.log.add(g)
}

// TestReplicasFailover: supervisors on several domains through two
// controller replicas on a 3-member etcd cluster; the etcd leader is
// killed, then a follower (no quorum), both come back, then a replica is
// killed mid-request. Tokens stay monotonic per domain (I1), no domain has
// two holders at once, and service resumes after each failure.
func TestReplicasFailover(t *testing.T) {
	c := StartCluster(t, 3)
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() }) // after the replicas and clients (cleanups run last first): none is left reconnecting
	signer, keys := leasetest.MustSigner(t)
	reps := []*replica{startReplica(t, c, "fo/", b.URL(), "replica-a", signer), startReplica(t, c, "fo/", b.URL(), "replica-b", signer)}
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}
	defer hc.CloseIdleConnections()
	mc := newMQTTClient(t, b.URL(), "supervisors")
	var lg log
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 6 {
		s := &supervisor{holder: "h" + string(rune('a'+i)), domain: "d" + string(rune('0'+i%3)), log: &lg}
		s.do = httpVia(hc, reps, s.domain, i)
		if i%3 == 2 {
			s.do = mqttVia(mc, s.domain)
		}
		wg.Add(1)
		go func() { defer wg.Done(); s.run(ctx) }()
	}
	progress(t, &lg, "start")
	c.Kill(c.Leader())
	progress(t, &lg, "etcd leader killed")
	follower := c.running()[0]
	c.Kill(follower) // one member left: no quorum
	time.Sleep(2 * ttl)
	c.Restart(follower)
	c.restartStopped()
	progress(t, &lg, "quorum back")
	killMidRequest(t, reps, hc, keys)
	progress(t, &lg, "replica killed")
	stop()
	wg.Wait()
	checkGrants(t, keys, lg.grants)
}

// progress waits until some more grants were observed.
func progress(t *testing.T, lg *log, phase string) {
	t.Helper()
	start := lg.n.Load()
	end := time.Now().Add(progressWait)
	for lg.n.Load() < start+5 {
		if time.Now().After(end) {
			t.Fatalf("%s: no progress in %v (%d grants so far)", phase, progressWait, start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%s: service resumed (%d grants)", phase, lg.n.Load())
}

// killMidRequest holds a domain through replica B, sends a waiting acquire
// for it through replica A and kills A while that request waits. The
// request fails or is answered held; service goes on through B.
func killMidRequest(t *testing.T, reps []*replica, hc *http.Client, keys *fence.KeyRing) {
	ctx := context.Background()
	h, err := httpDo(ctx, hc, reps[1].url, protocol.OpAcquire, "mid", protocol.Request{RequestID: leasetest.ID(), Holder: "keeper", TTLms: 60000})
	if err != nil || h.Code != protocol.CodeGranted {
		t.Fatalf("hold mid through B: %+v, %v", h, err)
	}
	answer := make(chan protocol.Response, 1)
	go func() {
		r, _ := httpDo(ctx, hc, reps[0].url, protocol.OpAcquire, "mid", protocol.Request{RequestID: leasetest.ID(), Holder: "late", TTLms: 1000, WaitMs: 30000})
		answer <- r
	}()
	time.Sleep(100 * time.Millisecond) // lets the acquire reach A; the test holds either way
	reps[0].kill()
	if r := <-answer; r.Code == protocol.CodeGranted {
		t.Fatalf("waiting acquire on a killed replica was granted a held domain: %+v", r)
	}
	g := reps[1].ctrl.Do(ctx, protocol.OpGet, "mid", protocol.Request{RequestID: leasetest.ID()})
	if g.Code != protocol.CodeHeld || g.Token != h.Token {
		t.Fatalf("mid after the kill: %+v; want still held by keeper", g)
	}
}

// checkGrants checks every observed grant:
//
//   - each token verifies, and two grants at one (domain, epoch, seq) are
//     one lease;
//   - I1: a grant whose acquire was sent after another grant of its domain
//     was received has a strictly greater token;
//   - one holder at a time: ordered by token, each grant's holder stopped
//     holding (end) no later than the next holder started (recv).
//
// Clock assumptions: supervisors and controllers run in this process and
// read one monotonic clock, so their times compare directly. A holder
// counts its lease from its acquire's send time and stops at send+TTL (or
// its last confirmed renewal's send+TTL, or its release); a controller
// counts from after the commit, or from its first read of the record, which
// are later. Across machines the same holds if clock rates agree to well
// under the TTL; wall clocks never need to agree.
func checkGrants(t *testing.T, keys *fence.KeyRing, grants []grant) {
	byDomain := map[string][]grant{}
	for _, g := range grants {
		tok, err := keys.Verify(g.tok.Raw)
		if err != nil {
			t.Fatalf("token does not verify: %v", err)
		}
		g.tok = tok
		byDomain[tok.Domain] = append(byDomain[tok.Domain], g)
	}
	if len(byDomain) != 3 {
		t.Fatalf("grants in %d domains, want 3", len(byDomain))
	}
	for d, gs := range byDomain {
		checkMonotonic(t, d, gs)
		checkOneHolder(t, d, gs)
	}
	t.Logf("%d grants checked", len(grants))
}

func checkMonotonic(t *testing.T, domain string, gs []grant) {
	for _, a := range gs {
		for _, b := range gs {
			cmp, err := b.tok.Compare(a.tok)
			switch {
			case err != nil:
				t.Fatalf("%s: %v", domain, err)
			case cmp == 0 && a.tok.Raw != b.tok.Raw:
				t.Fatalf("%s: two leases at %d/%d", domain, a.tok.Epoch, a.tok.Seq)
			case a.recv.Before(b.sent) && cmp <= 0:
				t.Fatalf("I1 broken in %s: seq %d granted after seq %d was received", domain, b.tok.Seq, a.tok.Seq)
			}
		}
	}
}

func checkOneHolder(t *testing.T, domain string, gs []grant) {
	sort.Slice(gs, func(i, j int) bool { c, _ := gs[i].tok.Compare(gs[j].tok); return c < 0 })
	for i := 1; i < len(gs); i++ {
		prev, next := gs[i-1], gs[i]
		if prev.end.After(next.recv) {
			t.Fatalf("%s: %s held seq %d until %v after %s got seq %d", domain, prev.tok.Holder, prev.tok.Seq,
				prev.end.Sub(next.recv), next.tok.Holder, next.tok.Seq)
		}
	}
}
