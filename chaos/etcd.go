package chaos

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdMembers is the size of the etcd store's cluster.
const etcdMembers = 3

// Timing of the etcd cluster: a short heartbeat and election timeout so
// that a fault's leader change fits a schedule; bounds on the harness's own
// waits for the cluster.
const (
	etcdHeartbeatMs   = 100
	etcdElectionMs    = 1000
	etcdStatusTimeout = time.Second            // one Status call
	etcdPoll          = 100 * time.Millisecond // between Status rounds
	etcdReadyTimeout  = 30 * time.Second       // start, or a heal, until the cluster serves
	etcdStopGrace     = 10 * time.Second
)

// etcdMember is one etcd process of the cluster.
type etcdMember struct {
	name      string // etcd1 …: the etcd member name and the process name
	clientURL string
	peerURL   string
	proc      *proc
}

// etcdCluster is the etcd store's cluster of a schedule: three etcd
// processes on loopback ports, and a client the harness uses to find the
// leader. Its methods are called from one goroutine at a time per fault
// (the injector never overlaps two etcd faults) and from stop.
type etcdCluster struct {
	members []*etcdMember
	cli     *clientv3.Client

	mu     sync.Mutex
	losses int // quorum-loss faults so far: which members the next one stops
}

// startEtcd starts the schedule's three etcd members (data and logs in
// in.dir, the binary in.etcdBin) as a new cluster and returns once every
// member answers and they agree on a leader, or fails when ctx ends or
// etcdReadyTimeout passes. On failure nothing it started is left running.
func startEtcd(ctx context.Context, in *install) (*etcdCluster, error) {
	e, err := newEtcdCluster(in)
	if err != nil {
		return nil, err
	}
	if err := e.start(ctx); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

// newEtcdCluster picks the members' ports and builds their processes.
func newEtcdCluster(in *install) (*etcdCluster, error) {
	e := &etcdCluster{}
	for i := range etcdMembers {
		client, err := freePort()
		if err != nil {
			return nil, err
		}
		peer, err := freePort()
		if err != nil {
			return nil, err
		}
		e.members = append(e.members, &etcdMember{name: fmt.Sprintf("etcd%d", i+1),
			clientURL: "http://" + client, peerURL: "http://" + peer})
	}
	token := fmt.Sprintf("fencechaos-%x-%x", in.plan.Seed, time.Now().UnixNano())
	for _, m := range e.members {
		m.proc = &proc{name: m.name, path: in.etcdBin, args: e.memberArgs(in, m, token),
			env: etcdEnv(), logPath: in.path(m.name + ".log")}
	}
	return e, nil
}

// memberArgs are m's etcd flags for the first start (a new cluster);
// restart switches the cluster state to existing.
func (e *etcdCluster) memberArgs(in *install, m *etcdMember, token string) []string {
	var initial []string
	for _, o := range e.members {
		initial = append(initial, o.name+"="+o.peerURL)
	}
	return []string{
		"--name", m.name,
		"--data-dir", in.path(m.name + "-data"),
		"--listen-client-urls", m.clientURL,
		"--advertise-client-urls", m.clientURL,
		"--listen-peer-urls", m.peerURL,
		"--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", strings.Join(initial, ","),
		"--initial-cluster-state", "new",
		"--initial-cluster-token", token,
		"--heartbeat-interval", fmt.Sprint(etcdHeartbeatMs),
		"--election-timeout", fmt.Sprint(etcdElectionMs),
		"--logger", "zap",
		"--log-outputs", "stderr",
	}
}

// etcdEnv lets etcd run on architectures its release does not support
// officially (Debian's 3.4 refuses to start on them otherwise).
func etcdEnv() []string {
	if runtime.GOARCH == "amd64" {
		return nil
	}
	return []string{"ETCD_UNSUPPORTED_ARCH=" + runtime.GOARCH}
}

// start launches the members and waits until the cluster serves.
func (e *etcdCluster) start(ctx context.Context) error {
	for _, m := range e.members {
		if err := m.proc.start(ctx); err != nil {
			return err
		}
	}
	var eps []string
	for _, m := range e.members {
		eps = append(eps, m.clientURL)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	e.cli = cli
	if err := e.awaitServing(ctx); err != nil {
		return fmt.Errorf("etcd cluster start: %w", err)
	}
	return nil
}

// clientConfig is the etcd section of a controller's YAML config
// (lease/etcdstore.Config): every member's client URL and short timeouts,
// so that a controller's request on a lost quorum fails well within a
// schedule.
func (e *etcdCluster) clientConfig() map[string]any {
	var eps []string
	for _, m := range e.members {
		eps = append(eps, m.clientURL)
	}
	return map[string]any{"endpoints": eps, "prefix": "/fencechaos/", "dial_timeout": "2s", "request_timeout": "2s"}
}

// stop ends every member (each is continued first, in case a fault
// stopped it) and closes the harness's client. It stops the current
// leader first, one member at a time while a leader answers: a leader
// ending hands its leadership to a follower, which is quick only while
// that follower runs (etcd waits up to 7 s for a stopping follower). Safe
// on a cluster that only partly started.
func (e *etcdCluster) stop() {
	left := slices.Clone(e.members)
	for e.cli != nil && len(left) > 1 {
		leader := leaderOf(e.statuses(context.Background()))
		if leader == nil || !slices.Contains(left, leader) {
			break
		}
		leader.proc.stop(etcdStopGrace)
		left = slices.DeleteFunc(left, func(m *etcdMember) bool { return m == leader })
	}
	var wg sync.WaitGroup
	for _, m := range left {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.proc.stop(etcdStopGrace)
		}()
	}
	wg.Wait()
	if e.cli != nil {
		_ = e.cli.Close()
	}
}

// fault injects an etcd fault of kind and returns its heal:
//
//   - kill-etcd SIGKILLs the current leader; heal restarts it on its data
//     directory (cluster state existing) and waits until every member
//     serves again.
//   - quorum-loss SIGSTOPs two of the three members (the leader and a
//     follower, or both followers, in turn); heal SIGCONTs them and waits
//     until every member serves again.
func (e *etcdCluster) fault(ctx context.Context, kind string) (func() error, error) {
	switch kind {
	case FaultKillEtcd:
		return e.killLeader(ctx)
	case FaultQuorumLoss:
		return e.loseQuorum(ctx)
	}
	return nil, fmt.Errorf("not an etcd fault: %q", kind)
}

// killLeader is the kill-etcd fault.
func (e *etcdCluster) killLeader(ctx context.Context) (func() error, error) {
	leader, err := e.awaitLeader(ctx)
	if err != nil {
		return nil, fmt.Errorf("kill-etcd: find the leader: %w", err)
	}
	leader.proc.kill()
	return func() error { return e.restart(context.WithoutCancel(ctx), leader) }, nil
}

// restart starts killed member m again, with the cluster state existing
// (its data directory holds its membership), and waits until the cluster
// serves with it.
func (e *etcdCluster) restart(ctx context.Context, m *etcdMember) error {
	if i := slices.Index(m.proc.args, "--initial-cluster-state"); i >= 0 {
		m.proc.args[i+1] = "existing"
	}
	if err := m.proc.start(ctx); err != nil {
		return fmt.Errorf("restart etcd member %s: %w", m.name, err)
	}
	if err := e.awaitServing(ctx); err != nil {
		return fmt.Errorf("etcd member %s restarted: %w", m.name, err)
	}
	return nil
}

// loseQuorum is the quorum-loss fault.
func (e *etcdCluster) loseQuorum(ctx context.Context) (func() error, error) {
	leader, err := e.awaitLeader(ctx)
	if err != nil {
		return nil, fmt.Errorf("quorum-loss: find the leader: %w", err)
	}
	e.mu.Lock()
	withLeader := e.losses%2 == 0
	e.losses++
	e.mu.Unlock()
	victims := e.quorumVictims(leader, withLeader)
	for i, m := range victims {
		if err := m.proc.signal(syscall.SIGSTOP); err != nil {
			return nil, errors.Join(fmt.Errorf("stop etcd member %s: %w", m.name, err), e.resume(victims[:i]))
		}
	}
	return func() error {
		if err := e.resume(victims); err != nil {
			return err
		}
		if err := e.awaitServing(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("etcd quorum back (%s continued): %w", memberNames(victims), err)
		}
		return nil
	}, nil
}

// quorumVictims picks the two members a quorum-loss stops: the leader and
// the next member, or the two members other than the leader.
func (e *etcdCluster) quorumVictims(leader *etcdMember, withLeader bool) []*etcdMember {
	i := slices.Index(e.members, leader)
	next, other := e.members[(i+1)%len(e.members)], e.members[(i+2)%len(e.members)]
	if withLeader {
		return []*etcdMember{leader, next}
	}
	return []*etcdMember{next, other}
}

// resume SIGCONTs members; the error names every member it failed on.
func (e *etcdCluster) resume(members []*etcdMember) error {
	var errs []error
	for _, m := range members {
		if err := m.proc.signal(syscall.SIGCONT); err != nil {
			errs = append(errs, fmt.Errorf("continue etcd member %s: %w", m.name, err))
		}
	}
	return errors.Join(errs...)
}

func memberNames(ms []*etcdMember) string {
	var names []string
	for _, m := range ms {
		names = append(names, m.name)
	}
	return strings.Join(names, ", ")
}

// memberStatus is one member's answer to Status (resp nil: err says why).
type memberStatus struct {
	m    *etcdMember
	resp *clientv3.StatusResponse
	err  error
}

// statuses asks every member for its status at once, each bounded by
// etcdStatusTimeout (a stopped member does not answer).
func (e *etcdCluster) statuses(ctx context.Context) []memberStatus {
	out := make([]memberStatus, len(e.members))
	var wg sync.WaitGroup
	for i, m := range e.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, etcdStatusTimeout)
			defer cancel()
			resp, err := e.cli.Status(sctx, m.clientURL)
			out[i] = memberStatus{m: m, resp: resp, err: err}
		}()
	}
	wg.Wait()
	return out
}

// leaderOf returns the member that reports itself leader, or nil.
func leaderOf(sts []memberStatus) *etcdMember {
	for _, s := range sts {
		if s.resp != nil && s.resp.Leader != 0 && s.resp.Header.MemberId == s.resp.Leader {
			return s.m
		}
	}
	return nil
}

// serving returns nil if every member answered, all name the same leader
// and that member reports itself leader; otherwise why not.
func serving(sts []memberStatus) error {
	var lead uint64
	for _, s := range sts {
		switch {
		case s.resp == nil:
			return fmt.Errorf("etcd member %s: %w", s.m.name, s.err)
		case s.resp.Leader == 0:
			return fmt.Errorf("etcd member %s has no leader", s.m.name)
		case lead != 0 && s.resp.Leader != lead:
			return fmt.Errorf("etcd members disagree on the leader (%x, %x)", lead, s.resp.Leader)
		}
		lead = s.resp.Leader
	}
	if leaderOf(sts) == nil {
		return errors.New("no etcd member reports itself leader")
	}
	return nil
}

// awaitServing polls until every member answers and they agree on a
// leader; it fails when ctx ends, after etcdReadyTimeout, or when a
// member's process exited, naming the member and the last reason.
func (e *etcdCluster) awaitServing(ctx context.Context) error {
	return e.poll(ctx, func(sts []memberStatus) error {
		if m := e.exited(); m != nil {
			return errExited{m}
		}
		return serving(sts)
	})
}

// errExited is a member's process ending while the harness waits for it.
type errExited struct{ m *etcdMember }

func (x errExited) Error() string {
	return fmt.Sprintf("etcd member %s exited (see %s)", x.m.name, x.m.proc.logPath)
}

// awaitLeader polls until a member reports itself leader and returns it.
func (e *etcdCluster) awaitLeader(ctx context.Context) (*etcdMember, error) {
	var leader *etcdMember
	err := e.poll(ctx, func(sts []memberStatus) error {
		if leader = leaderOf(sts); leader == nil {
			return errors.New("no etcd member reports itself leader")
		}
		return nil
	})
	return leader, err
}

// poll runs Status rounds until ok accepts one (or rejects it with
// errExited: no use waiting), bounded by ctx and etcdReadyTimeout. (Heals pass a ctx without cancellation: a heal runs
// even after the run was cancelled.)
func (e *etcdCluster) poll(ctx context.Context, ok func([]memberStatus) error) error {
	ctx, cancel := context.WithTimeout(ctx, etcdReadyTimeout)
	defer cancel()
	for {
		last := ok(e.statuses(ctx))
		if x := (errExited{}); last == nil || errors.As(last, &x) {
			return last
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ctx.Err(), last)
		case <-time.After(etcdPoll):
		}
	}
}

// exited returns a member whose process has ended, or nil.
func (e *etcdCluster) exited() *etcdMember {
	for _, m := range e.members {
		m.proc.mu.Lock()
		done := m.proc.exited
		m.proc.mu.Unlock()
		if done == nil {
			return m
		}
		select {
		case <-done:
			return m
		default:
		}
	}
	return nil
}
