package persist

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/fence"
)

// MaxCommandIDLen is the longest command id, in bytes.
const MaxCommandIDLen = 128

// Outcome is what Accept or Raise decided.
type Outcome int

const (
	// Accepted: the token is at or above the device's fence; the command is
	// journaled as accepted (Accept) or the fence raised (Raise).
	Accepted Outcome = iota + 1
	// Duplicate: the command id is in the journal; Decision.Record holds it
	// and nothing changed. A Duplicate in StateAccepted is still in flight.
	Duplicate
	// Stale: the token is older than the device's fence, which
	// Decision.Fence holds. Nothing changed.
	Stale
	// Conflict: the token has the fence's (epoch, seq) but names another
	// lease — a forgery or a controller bug. Nothing changed.
	Conflict
	// WrongDomain: the token belongs to another fencing domain than the
	// device's fence (Decision.Fence). Nothing changed.
	WrongDomain
)

func (o Outcome) String() string {
	switch o {
	case Accepted:
		return "accepted"
	case Duplicate:
		return "duplicate"
	case Stale:
		return "stale"
	case Conflict:
		return "conflict"
	case WrongDomain:
		return "wrong_domain"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Command is one command presented to Accept.
type Command struct {
	Device string      // device id, a valid fence id
	ID     string      // command id, 1..MaxCommandIDLen bytes, reused on retry
	Token  fence.Token // verified token the command carries (Raw set)
	// ReapplyInDoubt accepts again a command the journal holds as in_doubt
	// (subject to the fence check) instead of answering Duplicate. Only for
	// ops the driver declares idempotent.
	ReapplyInDoubt bool
}

// Decision is the durable answer to Accept or Raise.
type Decision struct {
	Outcome Outcome
	// Fence is the device's highest token after the decision (zero Token if
	// the device has none).
	Fence fence.Token
	// Raised reports that this decision moved the fence up.
	Raised bool
	// Record is the journal record: the new one for Accepted, the existing
	// one for Duplicate. Zero for Raise.
	Record Record
}

// Accept is the fence check the agent makes for every command. Atomically
// with respect to every other operation of the store it:
//
//  1. answers Duplicate from the journal if cmd.ID is known (even if its
//     token is stale by now: a retry gets its original answer);
//  2. answers Stale if the token is older than the device's fence, or
//     Conflict if it has the fence's position but is another lease;
//  3. otherwise raises the fence if the token is newer and journals the
//     command as accepted.
//
// It returns only once the decision is durable (fsynced): a driver may see
// the command after Accept returns Accepted, not before. A token of another
// domain than the device's fence is answered WrongDomain and changes nothing.
// Errors are invalid arguments (ErrInvalid) or storage failures (ErrFailed,
// ErrClosed). ctx bounds only the wait for room in the write queue.
func (s *Store) Accept(ctx context.Context, cmd Command) (Decision, error) {
	if err := checkCommand(cmd); err != nil {
		return Decision{}, err
	}
	var d Decision
	err := s.w.Submit(ctx, cmd.Device, func(tx *bolt.Tx) (bool, error) {
		var err error
		d, err = s.accept(tx, cmd)
		return d.Outcome == Accepted, err
	})
	if err != nil {
		return Decision{}, err
	}
	return d, nil
}

func (s *Store) accept(tx *bolt.Tx, cmd Command) (Decision, error) {
	j := journalFor(tx, cmd.Device)
	f, _, err := getFence(tx, cmd.Device)
	if err != nil {
		return Decision{}, err
	}
	old, known, err := j.get(cmd.ID)
	if err != nil {
		return Decision{}, err
	}
	if known && !(cmd.ReapplyInDoubt && old.State == StateInDoubt) {
		return Decision{Outcome: Duplicate, Fence: f.Token, Record: old}, nil
	}
	d, err := s.raise(tx, cmd.Device, f, cmd.Token)
	if err != nil || d.Outcome != Accepted {
		return d, err
	}
	rec := Record{ID: cmd.ID, State: StateAccepted, Token: cmd.Token.Fence(), AcceptedAt: s.opts.Now(), order: old.order}
	if old.order != 0 {
		rec.AcceptedAt = old.AcceptedAt // a re-accepted in-doubt command keeps its place and age
	}
	if err := j.put(rec); err != nil {
		return Decision{}, err
	}
	d.Record = rec
	return d, nil
}

// raise compares tok with the device's fence f and raises the fence if tok
// is newer. Outcome is Accepted (raised or equal lease), Stale, Conflict or
// WrongDomain. Its error is a storage error only.
func (s *Store) raise(tx *bolt.Tx, device string, f Fence, tok fence.Token) (Decision, error) {
	if f.Token.IsZero() {
		return s.putRaised(tx, device, tok)
	}
	cmp, err := tok.Compare(f.Token)
	if err != nil {
		return Decision{Outcome: WrongDomain, Fence: f.Token}, nil
	}
	switch {
	case cmp < 0:
		return Decision{Outcome: Stale, Fence: f.Token}, nil
	case cmp == 0 && !tok.SameLease(f.Token):
		return Decision{Outcome: Conflict, Fence: f.Token}, nil
	case cmp == 0:
		return Decision{Outcome: Accepted, Fence: f.Token}, nil
	}
	return s.putRaised(tx, device, tok)
}

func (s *Store) putRaised(tx *bolt.Tx, device string, tok fence.Token) (Decision, error) {
	if err := putFence(tx, device, Fence{Token: tok, RaisedAt: s.opts.Now()}); err != nil {
		return Decision{}, err
	}
	return Decision{Outcome: Accepted, Fence: tok, Raised: true}, nil
}

// Raise raises a device's fence to tok without a command — for a lease
// grant the agent saw announced before the new holder sent anything. The
// outcome is Accepted (Raised tells whether the fence moved), Stale,
// Conflict or WrongDomain; it returns once the new fence is durable.
func (s *Store) Raise(ctx context.Context, device string, tok fence.Token) (Decision, error) {
	if err := checkDevice(device); err != nil {
		return Decision{}, err
	}
	if err := checkToken(tok); err != nil {
		return Decision{}, err
	}
	var d Decision
	err := s.w.Submit(ctx, "", func(tx *bolt.Tx) (bool, error) {
		f, _, err := getFence(tx, device)
		if err != nil {
			return false, err
		}
		d, err = s.raise(tx, device, f, tok)
		return d.Raised, err
	})
	if err != nil {
		return Decision{}, err
	}
	return d, nil
}

// Complete records the result of an accepted command durably, moving it to
// StateDone. result is opaque to the store (the agent's encoded reply). A
// command that is not in StateAccepted gets ErrNotAccepted and nothing
// changes.
func (s *Store) Complete(ctx context.Context, device, id string, result []byte) error {
	if err := checkDevice(device); err != nil {
		return err
	}
	if err := checkCommandID(id); err != nil {
		return err
	}
	var logical error
	err := s.w.Submit(ctx, device, func(tx *bolt.Tx) (bool, error) {
		j := journalFor(tx, device)
		r, ok, err := j.get(id)
		if err != nil {
			return false, err
		}
		if !ok || r.State != StateAccepted {
			logical = fmt.Errorf("%w: %s/%s is %s", ErrNotAccepted, device, id, stateOf(r, ok))
			return false, nil
		}
		r.State, r.DoneAt, r.Result = StateDone, s.opts.Now(), append([]byte(nil), result...)
		return true, j.put(r)
	})
	if err != nil {
		return err
	}
	return logical
}

func stateOf(r Record, ok bool) string {
	if !ok {
		return "unknown"
	}
	return string(r.State)
}

func checkCommand(cmd Command) error {
	if err := checkDevice(cmd.Device); err != nil {
		return err
	}
	if err := checkCommandID(cmd.ID); err != nil {
		return err
	}
	return checkToken(cmd.Token)
}

func checkDevice(device string) error {
	if err := fence.CheckID("device", device); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func checkCommandID(id string) error {
	if len(id) == 0 || len(id) > MaxCommandIDLen {
		return fmt.Errorf("%w: command id is %d bytes, want 1..%d", ErrInvalid, len(id), MaxCommandIDLen)
	}
	return nil
}

func checkToken(tok fence.Token) error {
	if tok.Raw == "" {
		return fmt.Errorf("%w: token has no wire form (not signed or verified)", ErrInvalid)
	}
	if err := tok.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// cutoff is the acceptance time before which journal records are too old.
func (s *Store) cutoff() time.Time { return s.opts.Now().Add(-s.opts.MaxAge) }
