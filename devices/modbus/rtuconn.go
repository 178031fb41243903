package modbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/transport/serial"
)

// rtuConn speaks Modbus RTU over a transport/serial Link (exclusive port,
// reopened after an unplug). RTU has no transaction ids: a response is
// recognised by unit, function and shape only, so after a request that
// got no valid response the line must fall silent before the next one
// (quiet), and the port is flushed before every request.
type rtuConn struct {
	link    *serial.Link
	dec     *RTUDecoder
	unit    byte
	timeout time.Duration // for one response
	quiet   time.Duration // silence required after a request without a response
	t35     time.Duration // inter-frame silence (t3.5)
	char    time.Duration // one character on the line
	log     *slog.Logger
	// suspect: the last request got no valid response, so a late one may
	// still come. Only roundTrip uses it, txEnd and gaveUp.
	suspect bool
	txEnd   time.Time // when the last request's last byte left (estimated)
	gaveUp  time.Time // when the driver stopped waiting for a response
}

var _ conn = (*rtuConn)(nil)

// dialRTU opens the spec's port exclusively.
func dialRTU(s *spec, log *slog.Logger) (*rtuConn, error) {
	c := &rtuConn{dec: NewRTUDecoder(Responses, s.FrameGap), unit: s.unit, timeout: s.RequestTimeout,
		quiet: s.Quiet, char: s.charTime(), log: log}
	c.t35 = InterFrame(s.Port.Baud, c.char)
	link, err := serial.Dial(s.Port, c.dec, log)
	if err != nil {
		return nil, fmt.Errorf("modbus: %w", err)
	}
	c.link = link
	return c, nil
}

func (c *rtuConn) onAvailability(h func(bool, string)) { c.link.OnAvailability(h) }
func (c *rtuConn) close() error                        { return c.link.Close() }

// roundTrip implements conn.
func (c *rtuConn) roundTrip(ctx context.Context, req PDU, take func(PDU) error) error {
	if err := c.ready(ctx); err != nil {
		return err
	}
	lost := c.link.Lost()
	adu := EncodeRTU(c.unit, req)
	n, err := c.link.Send(ctx, adu)
	c.txEnd = time.Now().Add(time.Duration(n) * c.char)
	if err != nil {
		return c.sendFailed(n, len(adu), err)
	}
	c.suspect = true // until its response arrives
	err = c.await(ctx, req, take, lost)
	var le *linkError
	if errors.As(err, &le) {
		c.link.DropOutput()
		c.gaveUp = time.Now()
		return err
	}
	c.suspect = false
	return err
}

// ready waits for the line to be fit for a request: after a request
// without a response, silent for the quiet period since the driver gave up
// on it (and since the last byte); otherwise silent for t3.5 since the
// last frame. Then it flushes the port (and the decoder).
func (c *rtuConn) ready(ctx context.Context) error {
	silence, since := c.t35, time.Time{}
	if c.suspect {
		silence, since = c.quiet, c.gaveUp
	}
	if err := c.settle(ctx, silence, since); err != nil {
		return err
	}
	c.link.Flush()
	return nil
}

// settle waits until the line has carried no byte for d, counting from
// since at the earliest (bytes that arrive are read and discarded: late
// responses).
func (c *rtuConn) settle(ctx context.Context, d time.Duration, since time.Time) error {
	drained := 0
	for {
		last := c.lastActivity()
		if since.After(last) {
			last = since
		}
		wait := time.Until(last.Add(d))
		if wait <= 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return notSent(devices.CodeDeviceTimeout,
				fmt.Sprintf("the line did not fall silent for %v after a request without a response (%d frames drained); nothing was sent", d, drained), context.Cause(ctx))
		case m := <-c.link.Recv():
			t.Stop()
			drained++
			c.log.Warn("late input from device discarded", "bytes", fmt.Sprintf("% x", serial.Truncate(m.Data, 32)), "err", m.Err)
		case <-t.C:
		}
	}
}

// lastActivity is when the line last carried a byte, either way.
func (c *rtuConn) lastActivity() time.Time {
	last := c.dec.LastInput()
	if c.txEnd.After(last) {
		return c.txEnd
	}
	return last
}

// sendFailed maps a failed send of size bytes of which the port took n.
func (c *rtuConn) sendFailed(n, size int, err error) error {
	if n > 0 {
		c.suspect, c.gaveUp = true, time.Now()
		return sentLost(devices.CodeDeviceTimeout, fmt.Sprintf("the port took %d of the request's %d bytes before failing", n, size), err)
	}
	if errors.Is(err, serial.ErrWriteTimeout) {
		return notSent(devices.CodeDeviceTimeout, "the port did not take the request in time; nothing was sent", err)
	}
	return notSent(devices.CodeDeviceUnavailable, "the port is not available; nothing was sent", err)
}

// await waits for the response to req: frames of other units or
// functions, and frames take refuses (a late response of the same
// function), are logged and skipped; garbage too.
func (c *rtuConn) await(ctx context.Context, req PDU, take func(PDU) error, lost <-chan struct{}) error {
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	skipped := 0
	for {
		select {
		case <-ctx.Done():
			return sentLost(devices.CodeDeviceTimeout, fmt.Sprintf("no response before the command's deadline (%d frames skipped)", skipped), context.Cause(ctx))
		case <-t.C:
			return sentLost(devices.CodeDeviceTimeout, fmt.Sprintf("no response within request_timeout %v (%d frames skipped)", c.timeout, skipped), nil)
		case <-lost:
			return sentLost(devices.CodeDeviceUnavailable, "port lost after the request was sent", nil)
		case m := <-c.link.Recv():
			if done, err := c.handle(req, m, take); done {
				return err
			}
			skipped++
		}
	}
}

// handle takes one frame; done reports that it answered req.
func (c *rtuConn) handle(req PDU, m serial.Msg, take func(PDU) error) (done bool, err error) {
	if m.Err != nil {
		c.log.Warn("garbled input from device", "err", m.Err, "bytes", fmt.Sprintf("% x", m.Data))
		return false, nil
	}
	unit, res := SplitRTU(m.Data)
	if unit != c.unit || res.Function&0x7F != req.Function {
		c.log.Warn("frame for another unit or function skipped", "unit", unit, "function", res.Function)
		return false, nil
	}
	err = take(res)
	var pe *protocolError
	if errors.As(err, &pe) {
		c.log.Warn("frame that does not answer the request skipped (late response?)", "err", err)
		return false, nil
	}
	return true, err
}
