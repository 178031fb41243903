package serial

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// inboxLen bounds the decoded messages waiting for the driver; beyond it
// new messages are dropped (and logged), so the reader never blocks.
const inboxLen = 64

// Link is a serial port that stays open: one reader goroutine decodes what
// arrives into messages (Recv), and when the port fails (unplugged, I/O
// error) it closes it, reports the device unavailable and reopens it with
// backoff, then reports it available again.
//
// Send, Flush and Recv are meant for one driver goroutine; Available,
// OnAvailability and Close may be called from any goroutine.
type Link struct {
	cfg  Config
	log  *slog.Logger
	in   chan Msg
	stop chan struct{}
	done chan struct{}
	// reads counts the reads made on the port, including those that timed
	// out with nothing; tests use it to check the reader does not spin.
	reads atomic.Int64

	decMu sync.Mutex // guards dec
	dec   Decoder

	mu       sync.Mutex    // guards the fields below
	port     *Port         // nil while unavailable
	lost     chan struct{} // closed when port is lost; closed while port is nil
	reason   string        // why the port is unavailable
	handler  func(available bool, reason string)
	reported bool // last availability told to handler (true before the first report)
	closed   bool
}

// Dial opens the port cfg names with dec as its decoder and starts the
// reader. A port held by another process (ErrHeld) or an invalid cfg is an
// error; a port that cannot be opened for another reason (not plugged in
// yet) starts the Link unavailable, reopening in the background. log may be
// nil.
func Dial(cfg Config, dec Decoder, log *slog.Logger) (*Link, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Link{cfg: cfg.WithDefaults(), log: log, dec: dec, in: make(chan Msg, inboxLen),
		stop: make(chan struct{}), done: make(chan struct{}), reported: true}
	p, err := OpenPort(l.cfg)
	switch {
	case errors.Is(err, ErrHeld):
		return nil, err
	case err != nil:
		log.Warn("serial port not available at start; retrying", "path", cfg.Path, "err", err)
		l.reason = err.Error()
	}
	l.port, l.lost = p, make(chan struct{})
	if p == nil {
		close(l.lost)
	}
	go l.run()
	return l, nil
}

// Recv delivers decoded messages and garbage reports, in arrival order.
func (l *Link) Recv() <-chan Msg { return l.in }

// Available reports whether the port is open, and if not, why.
func (l *Link) Available() (bool, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.port != nil, l.reason
}

// Lost returns a channel that is closed once the port open now is lost
// (already closed if no port is open). A driver waiting for a reply selects
// on it to learn that the device went away mid-command.
func (l *Link) Lost() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// OnAvailability registers handler, called from the reader goroutine after
// each change of availability (never while a lock is held). If the port is
// unavailable at registration, handler is told soon after.
func (l *Link) OnAvailability(handler func(available bool, reason string)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.handler = handler
}

// Send writes b, giving up at ctx's deadline or after the write timeout,
// whichever is first. Errors wrap ErrUnavailable (no port: b was not sent),
// ErrWriteTimeout or ErrClosed. It returns how many bytes of b the kernel
// took, also on failure: when that is more than zero the device may have
// received them. After a write timeout the unsent rest is discarded
// (DropOutput), so it cannot reach the device later; another failed write
// marks the port lost.
func (l *Link) Send(ctx context.Context, b []byte) (int, error) {
	l.mu.Lock()
	p, reason, closed := l.port, l.reason, l.closed
	l.mu.Unlock()
	switch {
	case closed:
		return 0, ErrClosed
	case p == nil:
		return 0, fmt.Errorf("%w: %s", ErrUnavailable, reason)
	}
	deadline := time.Now().Add(l.cfg.WriteTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	n, err := p.Write(b, deadline)
	switch {
	case errors.Is(err, ErrWriteTimeout):
		p.ResetOutput() // best effort: a failed port shows in the reader
	case err != nil:
		l.lose(p, err)
	}
	return n, err
}

// DropOutput discards what was sent but not yet transmitted (TCOFLUSH), so
// that a request the driver gave up on cannot reach the device later.
// Bytes already on the wire, or in a UART's hardware FIFO its kernel driver
// does not flush, may still arrive.
func (l *Link) DropOutput() {
	l.mu.Lock()
	p := l.port
	l.mu.Unlock()
	if p != nil {
		p.ResetOutput() // best effort: a failed port shows in the reader
	}
}

// Flush discards output not yet transmitted (as DropOutput) and input
// received and not yet taken: the kernel's buffer, a partial message in the
// decoder and decoded messages waiting in Recv. Call it before sending a
// request so that stale bytes cannot answer it and nothing older goes out
// ahead of it.
func (l *Link) Flush() {
	l.mu.Lock()
	p := l.port
	l.mu.Unlock()
	if p != nil {
		p.ResetOutput() // best effort: a failed port shows in the reader
		p.ResetInput()
	}
	l.decMu.Lock()
	defer l.decMu.Unlock()
	l.dec.Reset()
	for {
		select {
		case <-l.in:
		default:
			return
		}
	}
}

// Close stops the reader and closes the port. Send fails with ErrClosed
// afterwards. Safe to call more than once.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	l.mu.Lock()
	p := l.port
	l.port = nil
	l.mu.Unlock()
	if p != nil {
		return p.Close()
	}
	return nil
}
