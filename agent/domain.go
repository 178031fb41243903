package agent

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/persist"
)

// domain is one fencing domain of this agent: the mirror of its durable
// fence, shared by every device of the domain, and the slot of the newest
// verified grant not yet made durable.
//
// A grant is never dropped: offer keeps the newest one in the slot (an older
// one is superseded, which is harmless: the newer one raises the fence
// higher), and settle makes it durable. The grant router settles after every
// offer; each device's decide and apply stages settle before they compare a
// command with the fence, so a grant that has been verified takes effect
// before any command compared after it, however full the queues are.
type domain struct {
	name    string
	store   *persist.Store
	log     *slog.Logger
	m       *metrics
	devices []*device // set up by the agent before Run; read-only after

	mu      sync.Mutex  // guards fence and pending
	fence   fence.Token // mirror of the durable fence (persist.DomainFence)
	pending fence.Token // newest verified grant above fence, not yet durable; zero if none

	settleMu sync.Mutex // serializes settle, so a raise is never made twice concurrently

	annMu     sync.Mutex    // guards announced, annAt and annTimer
	announced fence.Token   // the fence of the last state announcement of a raise
	annAt     time.Time     // when that announcement was made
	annTimer  *time.Timer   // pending trailing announcement, nil if none
	annEvery  time.Duration // least time between announcements within a lease; 0 is stateInterval (tests shorten it)
}

// stateInterval is the least time between two state announcements of
// raises within one lease (same epoch and holder): a raise that comes
// sooner is announced by one trailing announcement at the end of the
// interval, which carries the fence as it is then.
const stateInterval = time.Second

// current returns the fence mirror (zero if the domain has none).
func (dm *domain) current() fence.Token {
	dm.mu.Lock()
	defer dm.mu.Unlock()
	return dm.fence
}

// offer puts a verified grant in the slot if it is newer than both the fence
// and the grant already there.
func (dm *domain) offer(tok fence.Token) {
	if tok.Domain != dm.name {
		return // the caller routes by domain; never let a foreign token in
	}
	dm.mu.Lock()
	defer dm.mu.Unlock()
	if newerThan(tok, dm.fence) && newerThan(tok, dm.pending) {
		dm.pending = tok
	}
}

// settle makes the pending grant, if any, durable. It returns a storage
// error only; the caller reports it as fatal.
func (dm *domain) settle(ctx context.Context) error {
	dm.settleMu.Lock()
	defer dm.settleMu.Unlock()
	dm.mu.Lock()
	tok := dm.pending
	dm.mu.Unlock()
	if tok.IsZero() {
		return nil
	}
	dec, err := dm.store.Raise(ctx, tok)
	if err != nil {
		return err
	}
	dm.mu.Lock()
	if dm.pending.SameLease(tok) {
		dm.pending = fence.Token{}
	}
	dm.mu.Unlock()
	switch dec.Outcome {
	case persist.Accepted:
		dm.raised(dec.Fence)
		if dec.Raised {
			dm.log.Info("fence raised by grant", "fence", dec.Fence.String())
		}
	case persist.Conflict:
		dm.log.Warn("grant refused: same position as the fence, another lease", "token", tok.String(), "fence", dec.Fence.String())
	}
	return nil
}

// raised updates the mirror from a durable decision (the fence is at tok
// now) and, if that moved the mirror up, counts the raise and announces the
// new fence in the state of every device of the domain. Whoever moves the
// mirror announces — not necessarily the caller whose transaction raised
// the durable fence: two callers may race, and only one of them moves it.
func (dm *domain) raised(tok fence.Token) {
	if tok.IsZero() || tok.Domain != dm.name {
		return
	}
	dm.mu.Lock()
	up := newerThan(tok, dm.fence)
	if up {
		dm.fence = tok
	}
	dm.mu.Unlock()
	if !up {
		return
	}
	dm.m.fenceRaises.Inc()
	dm.announce(tok)
}

// announce publishes the state of every device of the domain after the
// fence moved up to tok: at once if tok is another epoch or holder than the
// last announced fence or stateInterval has passed since, else once at the
// end of the interval (rate-limited: a steady climb of seq under one lease
// does not cost one retained message per command). The trailing
// announcement reads the fence when it runs, so the newest fence is always
// announced, at most stateInterval late.
func (dm *domain) announce(tok fence.Token) {
	dm.annMu.Lock()
	last := dm.announced
	if !last.IsZero() && !newerThan(tok, last) {
		dm.annMu.Unlock() // a racing raise announced a newer fence already: it covered this one
		return
	}
	since := time.Since(dm.annAt)
	every := cmp.Or(dm.annEvery, stateInterval)
	if tok.Epoch != last.Epoch || tok.Holder != last.Holder || since >= every {
		dm.announced, dm.annAt = tok, time.Now()
		dm.annMu.Unlock()
		dm.publishStates()
		return
	}
	if dm.annTimer == nil {
		dm.annTimer = time.AfterFunc(every-since, dm.trailing)
	}
	dm.annMu.Unlock()
}

// trailing is the rate-limited announcement: it announces the fence as it
// is now.
func (dm *domain) trailing() {
	dm.annMu.Lock()
	dm.annTimer = nil
	dm.announced, dm.annAt = dm.current(), time.Now()
	dm.annMu.Unlock()
	dm.publishStates()
}

// flushAnnouncement makes a pending trailing announcement now (at
// shutdown, before the agent announces itself offline).
func (dm *domain) flushAnnouncement() {
	dm.annMu.Lock()
	pending := dm.annTimer != nil && dm.annTimer.Stop()
	dm.annTimer = nil
	dm.annMu.Unlock()
	if pending {
		dm.trailing()
	}
}

func (dm *domain) publishStates() {
	for _, d := range dm.devices {
		d.publishState()
	}
}

// newerThan reports whether a is a later lease than b of the same domain
// (any token is newer than the zero token). Tokens of different domains
// never compare: the answer is false.
func newerThan(a, b fence.Token) bool {
	if b.IsZero() {
		return !a.IsZero()
	}
	if a.Domain != b.Domain {
		return false
	}
	cmp, err := a.Compare(b)
	return err == nil && cmp > 0
}
