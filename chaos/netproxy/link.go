package netproxy

import (
	"bytes"
	"context"
	"net"
	"sync"
	"time"
)

// dir is a direction of a connection.
type dir int

const (
	up   dir = iota // client→target
	down            // target→client
)

const (
	// readSize is the most one read takes from a socket (one chunk).
	readSize = 32 << 10
	// queueLen is how many chunks a direction holds before its reader
	// stops reading, leaving the rest to the kernel's buffers and TCP's
	// flow control.
	queueLen = 64
)

// chunk is what one read returned, or the end of the stream (data nil).
type chunk struct {
	data []byte
	due  time.Time // when to deliver it
}

// dialState is where a connection is in reaching its target.
type dialState int

const (
	dialing dialState = iota // about to dial, or dialing
	waiting                  // accepted during an up blackhole, not dialed
	dialed                   // the target is connected
)

// link is one proxied connection: the client's socket, once dialed the
// target's, and a queue of chunks for each direction. Its goroutines are a
// reader per direction (pump) filling the queue, and a writer per
// direction (deliver) draining it; run dials and then is the up writer.
type link struct {
	p      *Proxy
	client net.Conn
	queue  [2]chan chunk
	done   chan struct{} // closed by close
	ctx    context.Context
	cancel context.CancelFunc // cancels a dial under way

	mu     sync.Mutex
	closed bool
	state  dialState
	target net.Conn
}

// newLink makes the link of a newly accepted client connection.
func newLink(p *Proxy, client net.Conn) *link {
	ctx, cancel := context.WithCancel(context.Background())
	return &link{
		p:      p,
		client: client,
		queue:  [2]chan chunk{make(chan chunk, queueLen), make(chan chunk, queueLen)},
		done:   make(chan struct{}),
		ctx:    ctx,
		cancel: cancel,
	}
}

// run dials the target once the up direction is open, then forwards both
// directions until the link closes. A failed dial resets the client.
func (l *link) run() {
	if !l.awaitDial() {
		return
	}
	t, err := dialTarget(l.ctx, l.p.targetAddr())
	if err != nil {
		if l.ctx.Err() == nil {
			l.p.dialFailed.Add(1)
		}
		l.close(true)
		return
	}
	if !l.attach(t) {
		return
	}
	l.p.spawn(func() { l.pump(down, t, l.queue[down]) })
	l.p.spawn(func() { l.deliver(down, l.client) })
	l.deliver(up, t)
}

// awaitDial waits until the up direction is open, marking the link as
// waiting meanwhile; it returns false if the link closed first.
func (l *link) awaitDial() bool {
	if blocked, _ := l.p.gate(up); !blocked {
		return l.setState(dialing) // false if the client left while waiting
	}
	if !l.setState(waiting) || !l.await(up) {
		return false
	}
	return l.setState(dialing)
}

// setState records s, returning false if the link is closed.
func (l *link) setState(s dialState) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state = s
	return !l.closed
}

// attach makes t the link's target socket, returning false (and closing
// t) if the link closed meanwhile.
func (l *link) attach(t net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = t.Close()
		return false
	}
	l.target, l.state = t, dialed
	return true
}

// undialed reports whether the link is waiting to dial because it was
// accepted during an up blackhole.
func (l *link) undialed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == waiting
}

// pump reads direction d from src into q, stamping every chunk with its
// delivery time, and ends the stream with an end chunk when a read fails.
// A client that goes away before its connection was ever dialed (it was
// accepted during a blackhole) is dropped at once: like a SYN that never
// got through, nothing of it reaches the target.
func (l *link) pump(d dir, src net.Conn, q chan<- chunk) {
	buf := make([]byte, readSize)
	for {
		n, err := src.Read(buf)
		now := time.Now()
		if n > 0 {
			if !l.send(q, chunk{data: bytes.Clone(buf[:n]), due: l.p.due(now)}) {
				return
			}
		}
		if err != nil {
			if d == up && l.undialed() {
				l.close(false)
				return
			}
			l.send(q, chunk{due: l.p.due(now)})
			return
		}
	}
}

// send queues c, returning false if the link closed first.
func (l *link) send(q chan<- chunk, c chunk) bool {
	select {
	case q <- c:
		return true
	case <-l.done:
		return false
	}
}

// deliver writes direction d's chunks to dst, each when it is due and its
// direction is open, and closes the link when it delivers the end. After a
// failed write (dst's peer reset it) it discards this direction's chunks:
// the failure reaches the other side as the end of the reverse direction,
// whose reader fails on the same socket, delayed and held like any chunk.
func (l *link) deliver(d dir, dst net.Conn) {
	broken := false
	for {
		var c chunk
		select {
		case c = <-l.queue[d]:
		case <-l.done:
			return
		}
		if !l.sleepUntil(c.due) || !l.await(d) {
			return
		}
		if c.data == nil {
			l.close(false)
			return
		}
		if broken {
			continue
		}
		if _, err := dst.Write(c.data); err != nil {
			broken = true
			continue
		}
		l.p.bytes[d].Add(int64(len(c.data)))
	}
}

// sleepUntil waits until t, returning false if the link closed first.
func (l *link) sleepUntil(t time.Time) bool {
	wait := time.Until(t)
	if wait <= 0 {
		select {
		case <-l.done:
			return false
		default:
			return true
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-l.done:
		return false
	}
}

// await waits until no partition stops direction d, returning false if the
// link closed first.
func (l *link) await(d dir) bool {
	for {
		blocked, changed := l.p.gate(d)
		if !blocked {
			return true
		}
		select {
		case <-changed:
		case <-l.done:
			return false
		}
	}
}

// close closes the link's sockets, with a TCP reset if reset is set, stops
// its goroutines and forgets it; calls after the first do nothing.
func (l *link) close(reset bool) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	t := l.target
	l.mu.Unlock()
	close(l.done)
	l.cancel()
	for _, c := range []net.Conn{l.client, t} {
		switch {
		case c == nil:
		case reset:
			abort(c)
		default:
			_ = c.Close()
		}
	}
	l.p.forget(l)
}
