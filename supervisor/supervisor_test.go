package supervisor_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"

	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/internal/stack"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
	"github.com/fencegate/fencegate/transport/mqtt"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/eclipse/paho.mqtt.golang.(*router).matchAndDispatch"))
}

func startStack(t *testing.T, latency time.Duration) *stack.Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Options{Dir: t.TempDir(), Latency: latency})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dial(t *testing.T, broker, holder string) *supervisor.Client {
	t.Helper()
	c := dialNoCleanup(t, broker, holder)
	t.Cleanup(c.Close)
	return c
}

// dialNoCleanup dials a client the test closes itself.
func dialNoCleanup(t *testing.T, broker, holder string) *supervisor.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := supervisor.Dial(ctx, supervisor.Config{MQTT: mqtt.Config{Broker: broker, ClientID: "sup-" + holder},
		Holder: holder, RetryInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestAcquireSendAndTypedErrors(t *testing.T) {
	s := startStack(t, 0)
	a := dial(t, s.URL(), "A")
	l, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Send(ctxT(t, 10*time.Second), "pump1", "set", map[string]int{"value": 3})
	if err != nil || res.Status != protocol.StatusApplied {
		t.Fatalf("send: %+v %v", res, err)
	}
	_, err = l.Send(ctxT(t, 10*time.Second), "pump1", "explode", nil)
	var re *supervisor.ResultError
	if !errors.Is(err, supervisor.ErrUnknownOp) || !errors.As(err, &re) || re.Result.Code != protocol.CodeUnknownOp {
		t.Fatalf("unknown op: %v", err)
	}
	if l.Err() != nil {
		t.Fatalf("lease lost after a rejection that is not stale: %v", l.Err())
	}
	b := dial(t, s.URL(), "B")
	if _, err := b.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: time.Second}); !errors.Is(err, supervisor.ErrHeld) {
		t.Fatalf("second holder: %v, want ErrHeld", err)
	}
}

// TestWaitHandoverOnRelease: B queues for the domain, A releases, B gets a
// newer token, the agent confirms the hand-over, and A's next command is
// stale — which marks A's lease lost.
func TestWaitHandoverOnRelease(t *testing.T) {
	s := startStack(t, 0)
	a, b := dial(t, s.URL(), "A"), dial(t, s.URL(), "B")
	la, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *supervisor.Lease, 1)
	go func() {
		lb, err := b.Acquire(ctxT(t, 20*time.Second), "plant", supervisor.AcquireOptions{TTL: 5 * time.Second, Wait: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- lb
	}()
	time.Sleep(100 * time.Millisecond) // let B queue; correctness does not depend on it
	if err := la.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	lb := <-got
	if lb == nil {
		t.FailNow()
	}
	if lb.Fence().Seq <= la.Fence().Seq {
		t.Fatalf("B's token %v not above A's %v", lb.Fence(), la.Fence())
	}
	if err := lb.WaitHandover(ctxT(t, 10*time.Second), "pump1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SendToken(ctxT(t, 10*time.Second), la.Token(), "pump1", "set", map[string]int{"value": 1}); !errors.Is(err, supervisor.ErrStale) {
		t.Fatalf("A after hand-over: %v, want ErrStale", err)
	}
	if !errors.Is(la.Err(), supervisor.ErrLeaseLost) {
		t.Fatalf("released lease Err = %v", la.Err())
	}
}

// TestRetriesKeepCommandID: with a slow device and a short retry interval
// the command is sent several times; it is applied once and answered.
func TestRetriesKeepCommandID(t *testing.T) {
	s := startStack(t, 700*time.Millisecond)
	a := dial(t, s.URL(), "A")
	l, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.SendID(ctxT(t, 20*time.Second), "cmd-1", l.Token(), "pump1", "set", map[string]int{"value": 9})
	if err != nil || res.ID != "cmd-1" {
		t.Fatalf("send: %+v %v", res, err)
	}
	entries, err := sim.ReadLog(s.DeviceLog("pump1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].ID != "cmd-1" {
		t.Fatalf("device log %+v, want cmd-1 once", entries)
	}
	again, err := a.SendID(ctxT(t, 10*time.Second), "cmd-1", l.Token(), "pump1", "set", map[string]int{"value": 9})
	if err != nil || !again.Duplicate {
		t.Fatalf("explicit retry: %+v %v", again, err)
	}
}

// TestLeaseLostWhenRenewalsFail partitions the supervisor from the broker:
// its lease is lost within the TTL, renewals stop, and after the partition
// heals the lease stays lost and the device refuses its token once another
// holder took over.
func TestLeaseLostWhenRenewalsFail(t *testing.T) {
	s := startStack(t, 0)
	p := startProxy(t, s.Broker.Addr())
	a := dial(t, "tcp://"+p.addr(), "A")
	la, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	renewals := countRenewals(t, s.URL())
	p.pause()
	select {
	case <-la.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("lease not lost while partitioned")
	}
	if !errors.Is(la.Err(), supervisor.ErrLeaseLost) {
		t.Fatalf("Err = %v", la.Err())
	}
	b := dial(t, s.URL(), "B")
	lb, err := b.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: 5 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := lb.WaitHandover(ctxT(t, 10*time.Second), "pump1"); err != nil {
		t.Fatal(err)
	}
	p.resume()
	if _, err = la.Send(ctxT(t, 10*time.Second), "pump1", "set", map[string]int{"value": 1}); !errors.Is(err, supervisor.ErrLeaseLost) {
		t.Fatalf("Send on the lost lease: %v, want ErrLeaseLost", err)
	}
	// A process that kept the token and sends anyway meets the fence.
	_, err = a.SendToken(ctxT(t, 10*time.Second), la.Token(), "pump1", "set", map[string]int{"value": 1})
	if !errors.Is(err, supervisor.ErrStale) {
		t.Fatalf("A's command after the partition: %v, want ErrStale", err)
	}
	// Renewals sent before the loss were held in the partition and arrived
	// ahead of the command; count only what comes after it.
	time.Sleep(200 * time.Millisecond)
	before := renewals.Load()
	time.Sleep(time.Second) // several of A's renewal periods
	if n := renewals.Load() - before; n != 0 {
		t.Fatalf("%d renewals after the lease was lost", n)
	}
}

// countRenewals counts renew requests seen on the broker.
func countRenewals(t *testing.T, broker string) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	opts, _ := mqtt.Config{Broker: broker, ClientID: "renew-watch"}.ClientOptions(nil)
	c := paho.NewClient(opts)
	if err := mqtt.Wait(c.Connect(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(0) })
	if err := mqtt.Wait(c.Subscribe(protocol.Topics{}.Lease("plant", "renew"), 1, func(paho.Client, paho.Message) { n.Add(1) }), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return &n
}

// proxy forwards TCP connections to a target and can stop forwarding
// (a partition), or only the broker's side of it, without closing them.
type proxy struct {
	ln     net.Listener
	target string
	paused atomic.Bool
	deaf   atomic.Bool // holds back what the broker sends, not what clients send
	wg     sync.WaitGroup
	mu     sync.Mutex // guards conns
	conns  []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }
func (p *proxy) pause()       { p.paused.Store(true) }
func (p *proxy) resume()      { p.paused.Store(false); p.deaf.Store(false) }

// deafen holds back what the broker sends until resume: requests get
// through, answers do not.
func (p *proxy) deafen() { p.deaf.Store(true) }

func (p *proxy) holdDown() bool { return p.paused.Load() || p.deaf.Load() }

// kick closes every connection made so far, as a broker restart would;
// clients reconnect through the proxy.
func (p *proxy) kick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out, p.holdDown)
		go p.pipe(out, in, p.paused.Load)
	}
}

// pipe copies src to dst, holding data back while hold says so.
func (p *proxy) pipe(dst, src net.Conn, hold func() bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for hold() {
			time.Sleep(5 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			return
		}
	}
}

func (p *proxy) close() {
	p.paused.Store(false)
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
