package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// LiveLeases returns the tokens of the stored leases that are live on the
// controller's clock — right after New, every stored lease, since each is
// honoured for its full TTL from the start — so that an API can announce
// them again (a grant topic may have been cleared while the controller was
// down). It reads the whole store; a Store that is not a Scanner gives
// none. A stored token that no trusted key verifies is skipped with a log
// line. Safe for concurrent use.
func (c *Controller) LiveLeases(ctx context.Context) ([]fence.Token, error) {
	sc, ok := c.store.(Scanner)
	if !ok {
		return nil, nil
	}
	var out []fence.Token
	now := c.clock.Now()
	err := sc.Scan(ctx, func(name string, rec Record) bool {
		if rec.Lease != nil && c.storedLive(name, rec.Lease, now) {
			out = c.appendVerified(out, name, rec.Lease.Token)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("live leases: %w", err)
	}
	return out, nil
}

// storedLive reports whether the stored lease l of name is live at now: by
// the domain's state if it is in memory, else by the full TTL from the
// controller's start (what loading it would give).
func (c *Controller) storedLive(name string, l *LeaseRecord, now time.Time) bool {
	c.mu.Lock()
	d, ok := c.domains[name]
	c.mu.Unlock()
	if ok {
		return d.liveAt(now)
	}
	return now.Before(c.started.Add(msDuration(l.TTLms)))
}

func (c *Controller) appendVerified(out []fence.Token, name, raw string) []fence.Token {
	tok, err := c.keys.Verify(raw)
	if err != nil || tok.Domain != name {
		c.log.Warn("stored lease does not verify; not announced", "domain", name, "err", err)
		return out
	}
	return append(out, tok)
}
