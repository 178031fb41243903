package lease

import "time"

// Clock is the controller's time source. Expiry uses only differences of
// Now readings, so with the real clock it runs on the monotonic clock.
// Implementations are safe for concurrent use.
type Clock interface {
	// Now returns the current time (with a monotonic reading).
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the real Clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
