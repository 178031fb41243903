package persist

import (
	"time"

	"github.com/fencegate/fencegate/internal/groupcommit"
)

// storeClock is the clock journal retention runs on. It starts, at Open,
// at the newest stamp in the journal and advances with the monotonic time
// since Open, so a step of the wall clock (either way) cannot make records
// look older, and retention can never shrink the dedupe window because of
// one. Stamps are only compared with each other, never with the wall clock.
type storeClock struct {
	base   time.Time
	uptime func() time.Duration
}

// newStoreClock reads the newest stamp of every journal in tx.
func newStoreClock(tx *groupcommit.Tx, uptime func() time.Duration) storeClock {
	var base time.Time
	for _, d := range fencedDevices(tx) {
		if at := journalFor(tx, d).lastStamp(); at.After(base) {
			base = at
		}
	}
	if base.IsZero() {
		base = time.UnixMilli(0)
	}
	return storeClock{base: base, uptime: uptime}
}

func (c storeClock) now() time.Time { return c.base.Add(c.uptime()) }
