package serial

import (
	"errors"
	"time"
)

// quickZeroReads is how many reads in a row may return nothing without
// waiting before the port counts as lost: a port that does that is gone
// (a vanished USB adapter), and reading on would spin.
const quickZeroReads = 3

// run owns the port's life: read while it is open, reopen with backoff
// while it is not, until Close.
func (l *Link) run() {
	defer close(l.done)
	backoff := l.cfg.ReopenMin
	for {
		l.report()
		l.mu.Lock()
		p := l.port
		l.mu.Unlock()
		if p != nil {
			err := l.readLoop(p)
			if err == nil {
				return
			}
			l.lose(p, err)
			backoff = l.cfg.ReopenMin
			continue
		}
		if !l.sleep(backoff) {
			return
		}
		backoff = min(backoff*2, l.cfg.ReopenMax)
		l.reopen()
	}
}

// readLoop reads p until it fails (the error) or Close (nil).
func (l *Link) readLoop(p *Port) error {
	buf := make([]byte, 4096)
	quick := 0
	for {
		select {
		case <-l.stop:
			return nil
		default:
		}
		start := time.Now()
		n, err := p.Read(buf)
		l.reads.Add(1)
		switch {
		case err != nil:
			return err
		case n > 0:
			quick = 0
			l.feed(buf[:n])
		case time.Since(start) < l.cfg.ReadTimeout/4:
			if quick++; quick >= quickZeroReads {
				return errors.New("serial: port returns no data without waiting (unplugged?)")
			}
		default:
			quick = 0
		}
	}
}

// feed decodes b and queues the messages without blocking.
func (l *Link) feed(b []byte) {
	l.decMu.Lock()
	defer l.decMu.Unlock()
	l.dec.Feed(b, func(m Msg) {
		select {
		case l.in <- m:
		default:
			l.log.Warn("serial input dropped: nobody is reading", "path", l.cfg.Path)
		}
	})
}

// lose closes p if it is still the Link's port and marks the Link
// unavailable with err as the reason.
func (l *Link) lose(p *Port, err error) {
	l.mu.Lock()
	if l.port != p {
		l.mu.Unlock()
		return
	}
	l.port, l.reason = nil, err.Error()
	close(l.lost)
	l.mu.Unlock()
	l.log.Warn("serial port lost; reopening", "path", l.cfg.Path, "err", err)
	p.Close()
}

// reopen tries once to open the port again.
func (l *Link) reopen() {
	p, err := OpenPort(l.cfg)
	if err != nil {
		l.mu.Lock()
		l.reason = err.Error()
		l.mu.Unlock()
		l.log.Debug("serial port reopen failed", "path", l.cfg.Path, "err", err)
		return
	}
	l.decMu.Lock()
	l.dec.Reset()
	l.decMu.Unlock()
	l.mu.Lock()
	l.port, l.reason, l.lost = p, "", make(chan struct{})
	l.mu.Unlock()
	l.log.Info("serial port reopened", "path", l.cfg.Path)
}

// report tells the handler the availability if it changed since the last
// report; it calls the handler with no lock held.
func (l *Link) report() {
	l.mu.Lock()
	avail, h := l.port != nil, l.handler
	changed := h != nil && avail != l.reported
	if changed {
		l.reported = avail
	}
	reason := l.reason
	l.mu.Unlock()
	if changed {
		h(avail, reason)
	}
}

// sleep waits d or until Close; it reports whether to go on.
func (l *Link) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.stop:
		return false
	}
}
