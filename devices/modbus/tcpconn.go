package modbus

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/fencegate/fencegate/devices"
)

// tcpConn speaks Modbus TCP (MBAP framing) to one server. One keeper
// goroutine owns connecting: it dials when there is no connection, with
// backoff, reports availability, and checks an idle connection every
// ReconnectMax for a close by the server; roundTrip uses the connection
// and drops it on any I/O failure, aborting it with a reset (SO_LINGER 0)
// so that a request still in the kernel's send queue is discarded, never
// delivered later.
type tcpConn struct {
	cfg     TCPConfig
	unit    byte
	timeout time.Duration
	log     *slog.Logger
	txn     uint16 // last transaction id; only roundTrip uses it

	// useMu is held by roundTrip for a whole exchange and by the keeper's
	// idle check, so that only one of them reads the connection.
	useMu sync.Mutex

	kick       chan struct{} // wakes the keeper to dial now
	stop       chan struct{}
	done       chan struct{}
	base       context.Context // ends at close, cancelling a dial
	cancelBase context.CancelFunc

	mu       sync.Mutex    // guards the fields below
	conn     *net.TCPConn  // nil while not connected
	attempt  chan struct{} // closed when the current dial attempt ends
	reason   string        // why there is no connection
	handler  func(available bool, reason string)
	reported bool // last availability told to handler (true before the first report)
	closed   bool
}

var _ conn = (*tcpConn)(nil)

// dialTCP starts the keeper, which connects in the background: a server
// that is down leaves the device unavailable, not the driver unopened.
func dialTCP(s *spec, log *slog.Logger) *tcpConn {
	t := &tcpConn{cfg: s.TCP, unit: s.unit, timeout: s.RequestTimeout, log: log, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), attempt: make(chan struct{}), reported: true,
		reason: "not connected yet"}
	t.base, t.cancelBase = context.WithCancel(context.Background())
	go t.run()
	return t
}

// run is the keeper: it dials whenever there is no connection.
func (t *tcpConn) run() {
	defer close(t.done)
	backoff := t.cfg.ReconnectMin
	for {
		if t.current() != nil {
			if !t.idle() {
				return
			}
			continue
		}
		if err := t.dial(); err == nil {
			backoff = t.cfg.ReconnectMin
			t.report(true, "")
			continue
		}
		t.report(false, t.why())
		if !t.sleep(backoff) {
			return
		}
		backoff = min(2*backoff, t.cfg.ReconnectMax)
	}
}

// idle waits while connected, checking the connection every
// ReconnectMax unless a roundTrip is using it; false once stopped.
func (t *tcpConn) idle() bool {
	tick := time.NewTimer(t.cfg.ReconnectMax)
	defer tick.Stop()
	select {
	case <-t.kick:
	case <-t.stop:
		return false
	case <-tick.C:
		if t.useMu.TryLock() {
			if c := t.current(); c != nil {
				if err := t.preflight(c); err != nil {
					t.log.Info("modbus tcp connection closed by the server", "err", err)
					t.abort(c, err)
				}
			}
			t.useMu.Unlock()
		}
	}
	return true
}

// dial makes one connection attempt and installs the connection.
func (t *tcpConn) dial() error {
	ctx, cancel := context.WithTimeout(t.base, t.cfg.ConnectTimeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", t.cfg.Address)
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.nextAttempt()
	if err != nil {
		t.reason = "connect " + t.cfg.Address + ": " + err.Error()
		return err
	}
	if t.closed {
		c.Close()
		return net.ErrClosed
	}
	t.conn, t.reason = c.(*net.TCPConn), ""
	t.log.Info("modbus tcp connected", "address", t.cfg.Address)
	return nil
}

// nextAttempt announces that a dial attempt ended; t.mu is held.
func (t *tcpConn) nextAttempt() {
	close(t.attempt)
	t.attempt = make(chan struct{})
}

func (t *tcpConn) current() *net.TCPConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conn
}

func (t *tcpConn) why() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reason
}

// sleep waits d, or less if kicked; false once stopped.
func (t *tcpConn) sleep(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-t.kick:
	case <-t.stop:
		return false
	}
	return true
}

func (t *tcpConn) wake() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// report tells the handler the availability if it changed; it calls the
// handler with no lock held.
func (t *tcpConn) report(avail bool, reason string) {
	t.mu.Lock()
	h := t.handler
	changed := h != nil && avail != t.reported
	if changed {
		t.reported = avail
	}
	t.mu.Unlock()
	if changed {
		h(avail, reason)
	}
}

func (t *tcpConn) onAvailability(h func(bool, string)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.handler = h
}

// close stops the keeper and closes the connection. Safe to call twice.
func (t *tcpConn) close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	c := t.conn
	t.conn = nil
	t.mu.Unlock()
	t.cancelBase()
	close(t.stop)
	<-t.done
	if c != nil {
		return c.Close()
	}
	return nil
}

// abort drops c with a reset, discarding what it has not sent yet.
func (t *tcpConn) abort(c *net.TCPConn, why error) {
	c.SetLinger(0)
	c.Close()
	t.mu.Lock()
	if t.conn == c {
		t.conn, t.reason = nil, why.Error()
	}
	t.mu.Unlock()
	t.wake()
}

// connected returns the connection, waiting for at most two dial attempts
// of the keeper (the first may have begun before this call) if there is
// none.
func (t *tcpConn) connected(ctx context.Context) (*net.TCPConn, error) {
	for range 3 {
		t.mu.Lock()
		c, attempt, closed := t.conn, t.attempt, t.closed
		t.mu.Unlock()
		switch {
		case closed:
			return nil, notSent(devices.CodeDeviceUnavailable, "driver closed", net.ErrClosed)
		case c != nil:
			return c, nil
		}
		t.wake()
		select {
		case <-attempt:
		case <-ctx.Done():
			return nil, notSent(devices.CodeDeviceUnavailable, "not connected ("+t.why()+") before the deadline; nothing was sent", context.Cause(ctx))
		}
	}
	return nil, notSent(devices.CodeDeviceUnavailable, "not connected: "+t.why()+"; nothing was sent", nil)
}

// usable returns a connection that the server has not closed: bytes
// waiting on it (a response to a request given up) are discarded; one
// found closed is dropped and another awaited.
func (t *tcpConn) usable(ctx context.Context) (*net.TCPConn, error) {
	for range 2 {
		c, err := t.connected(ctx)
		if err != nil {
			return nil, err
		}
		err = t.preflight(c)
		if err == nil {
			return c, nil
		}
		t.log.Info("modbus tcp connection closed by the server; reconnecting", "err", err)
		t.abort(c, err)
	}
	return nil, notSent(devices.CodeDeviceUnavailable, "connections close at once: "+t.why()+"; nothing was sent", nil)
}

// preflight reads what waits on c without blocking: nil if nothing (or
// only stale bytes, discarded), the error if the server closed it.
func (t *tcpConn) preflight(c *net.TCPConn) error {
	buf := make([]byte, 512)
	for {
		c.SetReadDeadline(time.Now())
		n, err := c.Read(buf)
		switch {
		case n > 0:
			t.log.Warn("stale bytes on the connection discarded", "bytes", n)
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil
		case err != nil:
			return err
		}
	}
}

// roundTrip implements conn.
func (t *tcpConn) roundTrip(ctx context.Context, req PDU, take func(PDU) error) error {
	t.useMu.Lock()
	defer t.useMu.Unlock()
	c, err := t.usable(ctx)
	if err != nil {
		return err
	}
	t.txn++
	deadline := time.Now().Add(t.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	if n, err := c.Write(mbap(t.txn, t.unit, req)); err != nil {
		t.abort(c, err)
		if n > 0 {
			return sentLost(devices.CodeDeviceTimeout, fmt.Sprintf("the connection took %d bytes of the request before failing", n), err)
		}
		return notSent(timeoutOr(err, devices.CodeDeviceUnavailable), "the connection did not take the request; nothing was sent", err)
	}
	return t.await(ctx, c, req, take)
}

// await reads responses until the one with the request's transaction id;
// others (late responses) are skipped.
func (t *tcpConn) await(ctx context.Context, c *net.TCPConn, req PDU, take func(PDU) error) error {
	for {
		txn, unit, res, err := readMBAP(c)
		if err != nil {
			t.abort(c, err)
			return t.readFailed(ctx, err)
		}
		if txn != t.txn {
			t.log.Warn("response to another transaction skipped (late response?)", "txn", txn, "want", t.txn)
			continue
		}
		if unit != t.unit && !(unit == 0xFF && res.Function&0x80 != 0) {
			return sentLost(devices.CodeDeviceError, "the response is from another unit", mismatch("unit %d, want %d", unit, t.unit))
		}
		err = take(res)
		var pe *protocolError
		if errors.As(err, &pe) {
			return sentLost(devices.CodeDeviceError, "the response does not answer the request", err)
		}
		return err
	}
}

func (t *tcpConn) readFailed(ctx context.Context, err error) error {
	var pe *protocolError
	switch {
	case errors.As(err, &pe):
		return sentLost(devices.CodeDeviceError, "malformed response; connection dropped", err)
	case ctx.Err() != nil:
		return sentLost(devices.CodeDeviceTimeout, "no response before the command's deadline", context.Cause(ctx))
	case errors.Is(err, os.ErrDeadlineExceeded):
		return sentLost(devices.CodeDeviceTimeout, fmt.Sprintf("no response within request_timeout %v", t.timeout), err)
	}
	return sentLost(devices.CodeDeviceUnavailable, "connection lost after the request was sent", err)
}

func timeoutOr(err error, code devices.Code) devices.Code {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return devices.CodeDeviceTimeout
	}
	return code
}

// mbapHeader is the MBAP header's length: transaction id, protocol id,
// length, unit id.
const mbapHeader = 7

// mbap frames req for Modbus TCP.
func mbap(txn uint16, unit byte, req PDU) []byte {
	b := binary.BigEndian.AppendUint16(nil, txn)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(2+len(req.Data)))
	return append(append(b, unit, req.Function), req.Data...)
}

// readMBAP reads one MBAP frame; a frame of another protocol id is read
// and skipped.
func readMBAP(r io.Reader) (txn uint16, unit byte, p PDU, err error) {
	for {
		var h [mbapHeader]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return 0, 0, p, err
		}
		n := int(binary.BigEndian.Uint16(h[4:]))
		if n < 3 || n > 254 {
			return 0, 0, p, mismatch("MBAP length %d", n)
		}
		body := make([]byte, n-1)
		if _, err := io.ReadFull(r, body); err != nil {
			return 0, 0, p, err
		}
		if binary.BigEndian.Uint16(h[2:]) == 0 {
			return binary.BigEndian.Uint16(h[:]), h[6], PDU{Function: body[0], Data: body[1:]}, nil
		}
	}
}

// endpoints are the Modbus TCP (address, unit) pairs open in this process,
// by device: like an exclusive serial port, one PLC unit is driven by one
// device entry only — two entries (in two fencing domains) would let each
// domain's holders write it past the other's fence.
var (
	endpointsMu sync.Mutex
	endpoints   = map[string]string{}
)

// claimEndpoint claims address and unit for device until release.
func claimEndpoint(address string, unit byte, device string) (release func(), err error) {
	key := fmt.Sprintf("%s unit %d", address, unit)
	endpointsMu.Lock()
	defer endpointsMu.Unlock()
	if other, ok := endpoints[key]; ok {
		return nil, fmt.Errorf("modbus: %s is already driven by device %q: one PLC unit, one device entry", key, other)
	}
	endpoints[key] = device
	var once sync.Once
	return func() {
		once.Do(func() {
			endpointsMu.Lock()
			delete(endpoints, key)
			endpointsMu.Unlock()
		})
	}, nil
}

// releasing is a connection that releases its endpoint claim when closed.
type releasing struct {
	conn
	release func()
}

func (r *releasing) close() error {
	defer r.release()
	return r.conn.close()
}
