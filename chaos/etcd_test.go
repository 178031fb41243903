package chaos

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/etcdstore"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/protocol"
)

// etcdBinary returns the etcd binary on PATH or skips t, saying how to get it.
func etcdBinary(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd is not on PATH: this test runs a real etcd cluster (apt-get install etcd-server)")
	}
	return path
}

// startTestEtcd starts a cluster in t.TempDir, stopped in t.Cleanup.
func startTestEtcd(t *testing.T, ctx context.Context) *etcdCluster {
	t.Helper()
	in := &install{plan: Plan{Seed: 7}, dir: t.TempDir(), etcdBin: etcdBinary(t)}
	e, err := startEtcd(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.stop)
	return e
}

// storeConfig decodes the cluster's controller config section as the
// controller does: YAML into etcdstore.Config.
func storeConfig(t *testing.T, e *etcdCluster) etcdstore.Config {
	t.Helper()
	b, err := yaml.Marshal(e.clientConfig())
	if err != nil {
		t.Fatal(err)
	}
	var cfg etcdstore.Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("the etcd config section does not decode into etcdstore.Config: %v\n%s", err, b)
	}
	if err := cfg.Validate("etcd"); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Endpoints) != etcdMembers || cfg.RequestTimeout != 2*time.Second || cfg.DialTimeout != 2*time.Second {
		t.Fatalf("decoded config %+v: want %d endpoints and 2 s timeouts", cfg, etcdMembers)
	}
	return cfg
}

// memberIDs maps each member's name to its etcd member id; every member
// must answer.
func memberIDs(t *testing.T, ctx context.Context, e *etcdCluster) map[string]uint64 {
	t.Helper()
	ids := map[string]uint64{}
	for _, s := range e.statuses(ctx) {
		if s.err != nil {
			t.Fatalf("etcd member %s: %v", s.m.name, s.err)
		}
		ids[s.m.name] = s.resp.Header.MemberId
	}
	return ids
}

// unanswered names the members that do not answer Status.
func unanswered(ctx context.Context, e *etcdCluster) []string {
	var names []string
	for _, s := range e.statuses(ctx) {
		if s.err != nil {
			names = append(names, s.m.name)
		}
	}
	slices.Sort(names)
	return names
}

// leaseClient grants and releases leases of one controller on the store.
type leaseClient struct {
	c    *lease.Controller
	keys *fence.KeyRing
}

// grant acquires domain, retrying internal errors (a request during an
// etcd election may time out) until ctx ends, and returns the verified
// token.
func (lc leaseClient) grant(t *testing.T, ctx context.Context, domain string) fence.Token {
	t.Helper()
	for {
		resp := lc.c.Do(ctx, protocol.OpAcquire, domain,
			protocol.Request{RequestID: leasetest.ID(), Holder: "h1", TTLms: 60000})
		if resp.Code == protocol.CodeGranted {
			tok, err := lc.keys.Verify(resp.Token)
			if err != nil {
				t.Fatalf("granted token does not verify: %v", err)
			}
			return tok
		}
		if resp.Code != protocol.CodeInternal || ctx.Err() != nil {
			t.Fatalf("acquire %s: %s (%s)", domain, resp.Code, resp.Message)
		}
	}
}

// release releases tok, which must be domain's current lease.
func (lc leaseClient) release(t *testing.T, ctx context.Context, domain string, tok fence.Token) {
	t.Helper()
	resp := lc.c.Do(ctx, protocol.OpRelease, domain, protocol.Request{RequestID: leasetest.ID(), Token: tok.Raw})
	if resp.Code != protocol.CodeReleased {
		t.Fatalf("release %s: %s (%s)", domain, resp.Code, resp.Message)
	}
}

// regrant releases domain's lease tok and acquires it again; the new
// token must be newer (the seq survived whatever happened in between).
func (lc leaseClient) regrant(t *testing.T, ctx context.Context, domain string, tok fence.Token) fence.Token {
	t.Helper()
	lc.release(t, ctx, domain, tok)
	next := lc.grant(t, ctx, domain)
	leasetest.Newer(t, tok, next)
	return next
}

// TestEtcdStoreThroughFaults runs a real 3-member etcd cluster (the etcd
// binary on PATH, e.g. Debian's 3.4), opens the controller's etcd store on
// it with the harness's client config, and grants leases through a
// kill-etcd and two quorum-loss faults: the kill takes down the leader
// only (the store still grants, a new leader serves) and the restarted
// member rejoins with its id; a quorum loss stops two members and the
// store's reads fail; after every heal all three members serve and the
// store grants a newer token in the same domain; at the end a scan sees
// both domains' records.
func TestEtcdStoreThroughFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startTestEtcd(t, ctx)
	ids := memberIDs(t, ctx, e)
	st, err := etcdstore.Open(ctx, storeConfig(t, e))
	if err != nil {
		t.Fatalf("open the etcd store on the etcd cluster: %v", err)
	}
	defer st.Close()
	c, keys := leasetest.MustControllerOn(t, lease.Config{}, st)
	lc := leaseClient{c: c, keys: keys}
	tok := lc.grant(t, ctx, "d1")

	tok = killEtcdLeader(t, ctx, e, lc, tok)
	if got := memberIDs(t, ctx, e); !equalIDs(got, ids) {
		t.Fatalf("member ids after the restart %v, before %v: the killed member did not rejoin as itself", got, ids)
	}
	for range 2 { // both variants: with and without the leader
		tok = loseEtcdQuorum(t, ctx, e, st, lc, tok)
	}
	if err := st.Err(); err != nil {
		t.Fatalf("the store failed for good: %v", err)
	}
	seqs := map[string]uint64{}
	if err := st.Scan(ctx, func(domain string, rec lease.Record) bool { seqs[domain] = rec.Seq; return true }); err != nil {
		t.Fatalf("scan: %v", err)
	}
	if len(seqs) != 2 || seqs["d1"] != tok.Seq || seqs["d2"] == 0 {
		t.Fatalf("scan found %v, want d1 at seq %d and d2", seqs, tok.Seq)
	}
}

func equalIDs(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// killEtcdLeader injects kill-etcd, checks the leader alone is gone and
// the store grants meanwhile, heals, and checks the store grants again.
func killEtcdLeader(t *testing.T, ctx context.Context, e *etcdCluster, lc leaseClient, tok fence.Token) fence.Token {
	t.Helper()
	heal, err := e.fault(ctx, FaultKillEtcd)
	if err != nil {
		t.Fatalf("inject kill-etcd: %v", err)
	}
	killed := e.exited()
	if killed == nil {
		t.Fatal("kill-etcd left every etcd process running")
	}
	if got := unanswered(ctx, e); !slices.Equal(got, []string{killed.name}) {
		t.Fatalf("during kill-etcd members %v do not answer, want only %s", got, killed.name)
	}
	if ok := lc.grant(t, ctx, "d2"); ok.Seq == 0 {
		t.Fatalf("grant during kill-etcd: seq 0 in %+v", ok)
	}
	leader, err := e.awaitLeader(ctx)
	if err != nil {
		t.Fatalf("no leader with one member killed: %v", err)
	}
	if leader == killed {
		t.Fatalf("the killed member %s is still the leader", killed.name)
	}
	if err := heal(); err != nil {
		t.Fatalf("heal kill-etcd: %v", err)
	}
	if m := e.exited(); m != nil {
		t.Fatalf("member %s is not running after the heal", m.name)
	}
	return lc.regrant(t, ctx, "d1", tok)
}

// loseEtcdQuorum injects quorum-loss, checks two members are stopped and
// the store's linearizable read fails, heals, and checks every member
// serves and the store grants again.
func loseEtcdQuorum(t *testing.T, ctx context.Context, e *etcdCluster, st *etcdstore.Store, lc leaseClient, tok fence.Token) fence.Token {
	t.Helper()
	heal, err := e.fault(ctx, FaultQuorumLoss)
	if err != nil {
		t.Fatalf("inject quorum-loss: %v", err)
	}
	stopped := unanswered(ctx, e)
	_, loadErr := st.Load(ctx, "d1")
	if err := heal(); err != nil {
		t.Fatalf("heal quorum-loss: %v", err)
	}
	if len(stopped) != 2 {
		t.Fatalf("during quorum-loss members %v do not answer, want two", stopped)
	}
	if loadErr == nil {
		t.Fatalf("a linearizable read succeeded with %v stopped", stopped)
	}
	if got := unanswered(ctx, e); len(got) != 0 {
		t.Fatalf("after the heal members %v do not answer", got)
	}
	return lc.regrant(t, ctx, "d1", tok)
}

// TestEtcdQuorumVictimsAlternate checks the members a quorum-loss stops:
// two distinct members, the leader among them every other time.
func TestEtcdQuorumVictimsAlternate(t *testing.T) {
	e := &etcdCluster{members: []*etcdMember{{name: "etcd1"}, {name: "etcd2"}, {name: "etcd3"}}}
	for _, leader := range e.members {
		with := e.quorumVictims(leader, true)
		without := e.quorumVictims(leader, false)
		for _, v := range [][]*etcdMember{with, without} {
			if len(v) != 2 || v[0] == v[1] {
				t.Fatalf("leader %s: victims %s, want two distinct members", leader.name, memberNames(v))
			}
		}
		if !slices.Contains(with, leader) || slices.Contains(without, leader) {
			t.Fatalf("leader %s: with %s, without %s", leader.name, memberNames(with), memberNames(without))
		}
	}
}

// TestEtcdServingNeedsEveryMemberAndOneLeader checks the readiness rule
// on made-up Status answers.
func TestEtcdServingNeedsEveryMemberAndOneLeader(t *testing.T) {
	ms := []*etcdMember{{name: "etcd1"}, {name: "etcd2"}, {name: "etcd3"}}
	st := func(i int, self, leader uint64) memberStatus {
		r := &clientv3.StatusResponse{Header: &etcdserverpb.ResponseHeader{MemberId: self}, Leader: leader}
		return memberStatus{m: ms[i], resp: r}
	}
	good := []memberStatus{st(0, 1, 2), st(1, 2, 2), st(2, 3, 2)}
	if err := serving(good); err != nil {
		t.Fatalf("a cluster with leader 2 known to all: %v", err)
	}
	if leaderOf(good) != ms[1] {
		t.Fatalf("leader %v, want etcd2", leaderOf(good))
	}
	cases := map[string][]memberStatus{
		"one silent":     {st(0, 1, 2), st(1, 2, 2), {m: ms[2], err: context.DeadlineExceeded}},
		"no leader":      {st(0, 1, 0), st(1, 2, 0), st(2, 3, 0)},
		"disagree":       {st(0, 1, 1), st(1, 2, 2), st(2, 3, 2)},
		"leader gone":    {st(0, 1, 3), st(1, 2, 3), {m: ms[2], err: context.DeadlineExceeded}},
		"no self-leader": {st(0, 1, 9), st(1, 2, 9), st(2, 3, 9)},
	}
	for name, sts := range cases {
		if err := serving(sts); err == nil {
			t.Errorf("%s: serving accepted %v", name, sts)
		}
	}
}
