package lease

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// MinBuildTime is the floor of BuildFloor when the binary carries no VCS
// time (go test, go run, builds outside a checkout): no fencegate binary is
// older. Raise it now and then.
var MinBuildTime = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

var buildFloor = sync.OnceValue(func() time.Time {
	floor := MinBuildTime
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if t, err := time.Parse(time.RFC3339, s.Value); s.Key == "vcs.time" && err == nil && t.After(floor) {
				floor = t
			}
		}
	}
	return floor
})

// BuildFloor is the earliest time a correct clock can show: the commit
// time of the binary's source (vcs.time), or MinBuildTime if that is
// missing or older. A new store whose clock reads before it refuses to
// take its epoch from the clock (ErrClockBehind).
func BuildFloor() time.Time { return buildFloor() }

// CheckCreationClock returns nil if now is a plausible time to take a new
// store's epoch from, else an error wrapping ErrClockBehind that says how
// to proceed.
func CheckCreationClock(now time.Time) error {
	if floor := BuildFloor(); now.Before(floor) {
		return fmt.Errorf("%w: the clock says %s, before this build (%s): a new store's epoch would sort below tokens already issued; set the clock or give the epoch explicitly (--epoch)",
			ErrClockBehind, now.UTC().Format(time.RFC3339), floor.UTC().Format(time.RFC3339))
	}
	return nil
}

// EpochFloor reports token positions seen outside the store — the API's
// retained grants, the agents' retained device states — so the controller
// never grants below them (Config.EpochFloor). It is called before every
// grant with the domain locked, concurrently for different domains.
type EpochFloor interface {
	// Floor returns the highest position (epoch, seq) seen for domain:
	// of its verified retained grant, or (epoch, 0) of any device state.
	// It may block (bounded by ctx) to read the domain's retained grant
	// the first time; an error means the floor is unknown.
	Floor(ctx context.Context, domain string) (epoch, seq uint64, err error)
}

// checkFloor returns nil if the domain's next token (c.epoch, seq) sorts
// above every position seen outside the store, else an error wrapping
// ErrEpochBehind that tells the operator what to do.
func (c *Controller) checkFloor(ctx context.Context, name string, seq uint64) error {
	if c.floor == nil {
		return nil
	}
	epoch, oseq, err := c.floor.Floor(ctx, name)
	if err != nil {
		return fmt.Errorf("epoch floor of %s: %w", name, err)
	}
	if fence.ComparePosition(c.epoch, seq, epoch, oseq) > 0 {
		return nil
	}
	return fmt.Errorf("%w: domain %q: this store's next token (epoch %d, seq %d) would not sort above (epoch %d, seq %d) seen on the broker; stop the controller and run `controller epoch-bump --epoch %d`",
		ErrEpochBehind, name, c.epoch, seq, epoch, oseq, epoch+1)
}
