package etcdtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// readyTimeout bounds a member's start: generous, the machine is shared.
const readyTimeout = 60 * time.Second

// T is what a cluster needs of its caller: a *testing.T or *testing.B, or
// the bench command's runner (cmd/fencebench-etcd).
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(f func())
	TempDir() string
}

// Cluster is an etcd cluster of in-process members on loopback. Its
// methods are for one test goroutine.
type Cluster struct {
	t       T
	token   string
	members []*Member
}

// Member is one etcd member: stopped when etcd is nil.
type Member struct {
	name, dir       string
	peerURL, cliURL url.URL
	etcd            *embed.Etcd
	mu              sync.Mutex // guards etcd against Stop racing Cleanup
	initial         bool
}

// StartCluster starts n members with data in t.TempDir and stops them in
// t.Cleanup.
func StartCluster(t T, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, token: fmt.Sprintf("fg-%d", time.Now().UnixNano())}
	dir := t.TempDir()
	for i := range n {
		c.members = append(c.members, &Member{name: fmt.Sprintf("m%d", i), dir: filepath.Join(dir, fmt.Sprintf("m%d", i)),
			peerURL: freeURL(t), cliURL: freeURL(t), initial: true})
	}
	t.Cleanup(c.StopAll)
	c.startAll("new")
	return c
}

// freeURL returns an http URL on a loopback port free a moment ago.
func freeURL(t T) url.URL {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return url.URL{Scheme: "http", Host: ln.Addr().String()}
}

func (c *Cluster) initialCluster() string {
	parts := make([]string, len(c.members))
	for i, m := range c.members {
		parts[i] = m.name + "=" + m.peerURL.String()
	}
	return strings.Join(parts, ",")
}

// startAll starts every member and waits until all are ready.
func (c *Cluster) startAll(state string) {
	for _, m := range c.members {
		c.start(m, state)
	}
	for i := range c.members {
		c.waitReady(i)
	}
}

func (c *Cluster) config(m *Member, state string) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = m.name, m.dir
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{m.peerURL}, []url.URL{m.peerURL}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{m.cliURL}, []url.URL{m.cliURL}
	cfg.InitialCluster, cfg.InitialClusterToken, cfg.ClusterState = c.initialCluster(), c.token, state
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.ListenMetricsUrls = nil
	return cfg
}

func (c *Cluster) start(m *Member, state string) {
	c.t.Helper()
	e, err := embed.StartEtcd(c.config(m, state))
	if err != nil {
		c.t.Fatalf("start etcd %s: %v", m.name, err)
	}
	m.mu.Lock()
	m.etcd = e
	m.mu.Unlock()
}

func (c *Cluster) waitReady(i int) {
	c.t.Helper()
	m := c.members[i]
	select {
	case <-m.etcd.Server.ReadyNotify():
	case err := <-m.etcd.Err():
		c.t.Fatalf("etcd %s: %v", m.name, err)
	case <-time.After(readyTimeout):
		c.t.Fatalf("etcd %s not ready after %v", m.name, readyTimeout)
	}
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.cliURL.String()
	}
	return eps
}

// Client returns a client of every member, closed in t.Cleanup.
func (c *Cluster) Client(t T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Leader returns the index of the member that is leader, waiting for one.
func (c *Cluster) Leader() int {
	c.t.Helper()
	end := time.Now().Add(readyTimeout)
	for time.Now().Before(end) {
		for i, m := range c.members {
			if e := m.running(); e != nil && e.Server.Leader() == e.Server.MemberID() {
				return i
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatal("no etcd leader")
	return -1
}

func (m *Member) running() *embed.Etcd {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.etcd
}

// Kill stops member i abruptly: no leadership transfer.
func (c *Cluster) Kill(i int) {
	m := c.members[i]
	m.mu.Lock()
	e := m.etcd
	m.etcd = nil
	m.mu.Unlock()
	if e != nil {
		e.Server.HardStop()
		e.Close()
	}
}

// Restart starts the stopped member i again on its data and waits until it
// is ready (which needs a quorum).
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.start(c.members[i], "existing")
	c.waitReady(i)
}

// StopAll stops every running member.
func (c *Cluster) StopAll() {
	for i := range c.members {
		c.Kill(i)
	}
}

// Snapshot saves a snapshot of the cluster's data to a file in dir, as
// `etcdctl snapshot save` does, and returns its path.
func (c *Cluster) Snapshot(ctx context.Context, cli *clientv3.Client, dir string) string {
	c.t.Helper()
	path := filepath.Join(dir, "snapshot.db")
	if err := saveSnapshot(ctx, cli, path); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// running returns the indexes of the running members.
func (c *Cluster) running() []int {
	var idx []int
	for i, m := range c.members {
		if m.running() != nil {
			idx = append(idx, i)
		}
	}
	return idx
}

// restartStopped restarts every stopped member.
func (c *Cluster) restartStopped() {
	c.t.Helper()
	for i, m := range c.members {
		if m.running() == nil {
			c.Restart(i)
		}
	}
}
