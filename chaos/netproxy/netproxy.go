// Package netproxy is a fault-injecting TCP proxy: the fault harness puts
// one in front of the broker for every process, so that it can partition,
// reset or slow that one process's link while the rest of the installation
// carries on.
//
// A Proxy accepts connections on its own listener and forwards each to its
// target. Of a connection's two directions, "up" is client→target and
// "down" is target→client. Each direction is a stream of chunks (what one
// read returned) followed by the end of the stream (the sender closed, or
// its socket failed); a chunk and the end travel alike: they are delayed,
// held by a partition and delivered in the order they were read. When a
// direction's end is delivered the proxy closes both sockets of the
// connection (there is no half-close).
//
// Faults are like a network's, not like an application's: during a
// blackhole nothing crosses, not even a close, and TCP on both sides keeps
// waiting; when it heals, the held bytes flow on in order.
package netproxy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is a kind of partition.
type Mode int

// The modes of Partition.
const (
	// None is no partition: Partition(None) is Heal.
	None Mode = iota
	// Blackhole stops both directions of every live and new connection.
	// Bytes the proxy read wait in its buffers, and once those are full in
	// the kernel's; new connections are accepted but are not dialed to the
	// target until the up direction opens again. A new connection whose
	// client closes before then is dropped, nothing of it reaching the
	// target, as if its SYN had never got through.
	Blackhole
	// BlackholeUp stops only the up direction (client→target), like
	// Blackhole otherwise.
	BlackholeUp
	// BlackholeDown stops only the down direction (target→client); new
	// connections are dialed at once, so their bytes reach the target.
	BlackholeDown
	// Reset closes every live connection at once with a TCP reset (both the
	// client and the target see it) and, until the partition ends, resets
	// every new connection right after accepting it.
	Reset
)

// String names the mode, for logs.
func (m Mode) String() string {
	switch m {
	case None:
		return "none"
	case Blackhole:
		return "blackhole"
	case BlackholeUp:
		return "blackhole-up"
	case BlackholeDown:
		return "blackhole-down"
	case Reset:
		return "reset"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// blocks reports whether m stops direction d.
func (m Mode) blocks(d dir) bool {
	switch m {
	case Blackhole, Reset:
		return true
	case BlackholeUp:
		return d == up
	case BlackholeDown:
		return d == down
	}
	return false
}

// dialTimeout bounds one dial of the target; a dial that fails or times
// out resets the client's connection.
const dialTimeout = 10 * time.Second

// Stats counts what a Proxy did since Listen.
type Stats struct {
	Accepted   int64 // connections accepted, refused ones included
	Refused    int64 // connections reset at once because of a Reset partition
	DialFailed int64 // connections reset because the target could not be dialed
	Live       int   // connections open now (accepted, not yet closed)
	Up         int64 // bytes delivered client→target
	Down       int64 // bytes delivered target→client
}

// Proxy forwards TCP connections accepted on its listener to its target,
// injecting the faults it is told to. All its methods are safe for
// concurrent use, also while traffic flows.
type Proxy struct {
	ln      net.Listener
	closing chan struct{} // closed when Close begins
	wg      sync.WaitGroup
	running atomic.Int64 // goroutines started and not yet returned

	accepted, refused, dialFailed atomic.Int64
	bytes                         [2]atomic.Int64 // delivered, by dir

	mu      sync.Mutex
	closed  bool
	mode    Mode
	changed chan struct{} // closed and replaced whenever mode changes
	delay   time.Duration
	jitter  time.Duration
	target  string
	links   map[*link]struct{}
}

// Listen starts a Proxy listening on listenAddr (such as "127.0.0.1:0")
// that forwards every connection to target (host:port). target is not
// dialed until a connection arrives.
func Listen(listenAddr, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		return nil, fmt.Errorf("netproxy: listen: %w", err)
	}
	p := &Proxy{
		ln:      ln,
		closing: make(chan struct{}),
		changed: make(chan struct{}),
		target:  target,
		links:   make(map[*link]struct{}),
	}
	p.spawn(p.acceptLoop)
	return p, nil
}

// Addr is the address the proxy listens on, host:port, for clients to dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Partition starts a partition of kind mode, replacing any partition in
// force; Partition(None) is Heal. A direction it stops delivers nothing
// read after Partition returns, until Heal; a write to a socket already
// under way when it is called may still complete. It panics on a Mode that
// is not one of the constants.
func (p *Proxy) Partition(mode Mode) {
	if mode < None || mode > Reset {
		panic(fmt.Sprintf("netproxy: Partition(%v): unknown mode", mode))
	}
	p.mu.Lock()
	p.mode = mode
	close(p.changed)
	p.changed = make(chan struct{})
	var doomed []*link
	if mode == Reset {
		doomed = p.liveLinks()
	}
	p.mu.Unlock()
	for _, l := range doomed {
		l.close(true)
	}
}

// Heal ends the partition in force, if any: held bytes flow on in order,
// connections opened during a blackhole are dialed, new connections are
// no longer reset.
func (p *Proxy) Heal() { p.Partition(None) }

// SetDelay makes every chunk and every end read from now on be delivered d
// plus a uniformly random jitter in [0, jitter) after it was read, but
// never before what was read before it in the same direction (jitter does
// not reorder). Zero for both is no delay; negative values count as zero.
// Chunks already read keep the delivery time they were given.
func (p *Proxy) SetDelay(d, jitter time.Duration) {
	p.mu.Lock()
	p.delay, p.jitter = max(d, 0), max(jitter, 0)
	p.mu.Unlock()
}

// SetTarget makes connections dialed from now on go to addr. Live
// connections keep their target; a connection accepted during a blackhole
// and not dialed yet goes to addr when its up direction opens.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	live := len(p.links)
	p.mu.Unlock()
	return Stats{
		Accepted:   p.accepted.Load(),
		Refused:    p.refused.Load(),
		DialFailed: p.dialFailed.Load(),
		Live:       live,
		Up:         p.bytes[up].Load(),
		Down:       p.bytes[down].Load(),
	}
}

// Close stops the listener, closes every connection (both sockets) and
// returns once all the proxy's goroutines have returned. It returns the
// listener's close error; calls after the first do nothing and return nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.closing)
	doomed := p.liveLinks()
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range doomed {
		l.close(false)
	}
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("netproxy: close listener: %w", err)
	}
	return nil
}

// spawn runs f in a goroutine that Close waits for. The caller must be
// Listen or a goroutine spawn started, so that Close never waits before
// the count is raised.
func (p *Proxy) spawn(f func()) {
	p.wg.Add(1)
	p.running.Add(1)
	go func() {
		defer p.wg.Done()
		defer p.running.Add(-1)
		f()
	}()
}

// liveLinks returns the live connections; p.mu must be held.
func (p *Proxy) liveLinks() []*link {
	ls := make([]*link, 0, len(p.links))
	for l := range p.links {
		ls = append(ls, l)
	}
	return ls
}

// acceptLoop accepts connections until the listener is closed.
func (p *Proxy) acceptLoop() {
	backoff := time.Millisecond
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || !p.pause(backoff) {
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = time.Millisecond
		p.accepted.Add(1)
		p.admit(c)
	}
}

// pause waits d after a failed Accept (out of descriptors, say), returning
// false if Close began meanwhile.
func (p *Proxy) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.closing:
		return false
	}
}

// admit registers a newly accepted client connection and starts forwarding
// it, or resets it if a Reset partition is in force or Close has begun.
func (p *Proxy) admit(c net.Conn) {
	p.mu.Lock()
	if p.closed || p.mode == Reset {
		refused := !p.closed
		p.mu.Unlock()
		if refused {
			p.refused.Add(1)
		}
		abort(c)
		return
	}
	l := newLink(p, c)
	if p.mode.blocks(up) {
		// Waiting from the start, not from when run gets to it: a client
		// that leaves before then must be dropped too (pump), not dialed
		// after Heal.
		l.state = waiting
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	p.spawn(func() { l.pump(up, c, l.queue[up]) })
	p.spawn(l.run)
}

// gate returns whether mode stops direction d now, and a channel closed at
// the next change of mode.
func (p *Proxy) gate(d dir) (blocked bool, changed <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode.blocks(d), p.changed
}

// due returns when a chunk read at now is to be delivered. Jitter cannot
// reorder: a direction has one writer taking its chunks in the order they
// were read, so a chunk goes at the later of its due time and the delivery
// of the chunk before it.
func (p *Proxy) due(now time.Time) time.Time {
	p.mu.Lock()
	d, j := p.delay, p.jitter
	p.mu.Unlock()
	if j > 0 {
		d += rand.N(j)
	}
	return now.Add(d)
}

// targetAddr is the address to dial for a new connection.
func (p *Proxy) targetAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// forget removes a closed connection from the live ones.
func (p *Proxy) forget(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// abort closes c with a TCP reset rather than an orderly close.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// dialTarget dials addr, giving up when ctx ends.
func dialTarget(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("netproxy: dial target: %w", err)
	}
	return c, nil
}
