package lease

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
)

// ErrNotScannable: the store cannot list its domains (it is not a Scanner).
var ErrNotScannable = errors.New("lease: store cannot list its domains")

// DomainStatus is one fencing domain as the controller sees it, for status
// pages.
type DomainStatus struct {
	Domain string `json:"domain"`
	// Holder, Epoch and Seq name the domain's current lease, or the last
	// one if it expired or was released (Live false; Holder empty after a
	// release).
	Holder string `json:"holder,omitempty"`
	Epoch  uint64 `json:"epoch,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	// HighSeq is the highest seq ever issued in the domain.
	HighSeq uint64 `json:"high_seq"`
	Live    bool   `json:"live"`
	// LeftMs is the lease's time left on the controller's clock, in ms.
	LeftMs int64 `json:"left_ms"`
}

// DomainStatuses lists every stored domain, by name, with its lease and
// time left. It reads the whole store; a Store that is not a Scanner gives
// ErrNotScannable. Safe for concurrent use.
func (c *Controller) DomainStatuses(ctx context.Context) ([]DomainStatus, error) {
	sc, ok := c.store.(Scanner)
	if !ok {
		return nil, ErrNotScannable
	}
	var out []DomainStatus
	now := c.clock.Now()
	err := sc.Scan(ctx, func(name string, rec Record) bool {
		s := DomainStatus{Domain: name, HighSeq: rec.Seq}
		if l := rec.Lease; l != nil {
			s.Holder, s.Epoch, s.Seq = l.Holder, l.Epoch, l.Seq
			left := c.leftOn(name, l, now)
			s.Live, s.LeftMs = left > 0, left.Milliseconds()
		}
		out = append(out, s)
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("domain statuses: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Domain < out[j].Domain })
	return out, nil
}

// leftOn is the time left on the stored lease l of name at now: from the
// domain's deadline if it is in memory, else the full TTL from the
// controller's start (as storedLive counts it).
func (c *Controller) leftOn(name string, l *LeaseRecord, now time.Time) time.Duration {
	c.mu.Lock()
	d, ok := c.domains[name]
	c.mu.Unlock()
	if !ok {
		return max(c.started.Add(msDuration(l.TTLms)).Sub(now), 0)
	}
	u := d.until.Load()
	if u == 0 {
		return 0
	}
	return max(time.Duration(u)-now.Sub(d.base), 0)
}
