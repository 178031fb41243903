package persist

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/internal/groupcommit"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// MaxCommandIDLen is the longest command id, in bytes: protocol v1's limit.
const MaxCommandIDLen = protocol.MaxCommandIDLen

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
	// IDReused: the command id is in the journal for a different command
	// (another token position, op or args); Decision.Record holds the
	// journaled one. Nothing changed: a reused id never returns someone
	// else's result and never re-applies anything.
	IDReused
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
	case IDReused:
		return "id_reused"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Command is one command presented to Accept.
type Command struct {
	Device string      // device id, a valid fence id
	ID     string      // command id, 1..MaxCommandIDLen bytes, reused on retry
	Token  fence.Token // verified token the command carries (Raw set); its domain is the fence compared
	Op     string      // operation name; with Args and the token position it makes the command's digest
	Args   []byte      // op arguments as sent (JSON or nil)
	// Idempotent records that the driver declares Op idempotent. It is
	// journaled with the command: a retry of a command the journal holds as
	// in_doubt is accepted again (subject to the fence check) only if the
	// journaled command was idempotent — never on the retry's say-so.
	Idempotent bool
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
//  1. answers IDReused if cmd.ID is journaled for a different command
//     (digest of token position, op and args), Duplicate if it is the same
//     command (even if its token is stale by now: a retry gets its original
//     answer);
//  2. answers Stale if the token is older than the fence of its domain —
//     the highest token accepted for any device of the domain, or raised by
//     a grant — or Conflict if it has that position but is another lease;
//  3. otherwise raises the domain's fence (and the device's record of its
//     highest token) if the token is newer and journals the command.
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
	err := s.w.Submit(ctx, cmd.Device, func(tx *groupcommit.Tx) (bool, error) {
		var err error
		d, err = s.accept(tx, cmd)
		return d.Outcome == Accepted, err
	})
	if err != nil {
		return Decision{}, err
	}
	return d, nil
}

func (s *Store) accept(tx *groupcommit.Tx, cmd Command) (Decision, error) {
	j := journalFor(tx, cmd.Device)
	old, known, err := j.get(cmd.ID)
	if err != nil {
		return Decision{}, err
	}
	digest := commandDigest(cmd)
	if known {
		if d, done, err := s.journaled(tx, old, digest, cmd.Token); done || err != nil {
			if err == nil && d.Outcome == Duplicate && old.State == StateAccepted {
				s.pins.pin(cmd.Device, cmd.ID) // before this batch's pruning; see pins
			}
			return d, err
		}
	}
	d, err := s.raiseForDevice(tx, cmd.Device, cmd.Token)
	if err != nil || d.Outcome != Accepted {
		return d, err
	}
	rec := Record{ID: cmd.ID, State: StateAccepted, Token: cmd.Token.Fence(), AcceptedAt: s.opts.Now(),
		Digest: digest, Idempotent: cmd.Idempotent, Op: cmd.Op, Args: compactJSON(cmd.Args), order: old.order, stamp: s.clock.now()}
	if old.order != 0 {
		rec.AcceptedAt = old.AcceptedAt // a re-accepted in-doubt command keeps its place and age
		if err := unindexInDoubt(tx, j, cmd.ID); err != nil {
			return Decision{}, err
		}
	}
	if err := j.put(rec); err != nil {
		return Decision{}, err
	}
	d.Record = rec
	return d, nil
}

// journaled decides a command whose id is already journaled: IDReused for
// another command, Duplicate for the same one — unless the journaled command
// is in doubt and was declared idempotent, in which case done is false and
// Accept goes on to the fence check.
func (s *Store) journaled(tx *groupcommit.Tx, old Record, digest string, tok fence.Token) (d Decision, done bool, err error) {
	f, _, err := getDomainFence(tx, tok.Domain)
	if err != nil {
		return Decision{}, true, err
	}
	switch {
	case old.Digest != "" && old.Digest != digest, old.Digest == "" && !sameLeaseFence(old.Token, tok):
		// A record from before digests holds only the lease: compare that.
		return Decision{Outcome: IDReused, Fence: f.Token, Record: old}, true, nil
	case old.State == StateInDoubt && old.Idempotent:
		return Decision{}, false, nil
	}
	return Decision{Outcome: Duplicate, Fence: f.Token, Record: old}, true, nil
}

func sameLeaseFence(f fence.Fence, tok fence.Token) bool {
	return f.Epoch == tok.Epoch && f.Seq == tok.Seq && f.Holder == tok.Holder
}

// raiseForDevice checks tok against the device's own record (a token of
// another domain is WrongDomain) and then against its domain's fence,
// raising both if tok is newer.
func (s *Store) raiseForDevice(tx *groupcommit.Tx, device string, tok fence.Token) (Decision, error) {
	df, _, err := getFence(tx, device)
	if err != nil {
		return Decision{}, err
	}
	if !df.Token.IsZero() && df.Token.Domain != tok.Domain {
		return Decision{Outcome: WrongDomain, Fence: df.Token}, nil
	}
	d, err := s.raiseDomain(tx, tok)
	if err != nil || d.Outcome != Accepted {
		return d, err
	}
	if cmp, _ := tok.Compare(df.Token); df.Token.IsZero() || cmp > 0 {
		if err := putFence(tx, device, Fence{Token: tok, RaisedAt: s.opts.Now()}); err != nil {
			return Decision{}, err
		}
	}
	return d, nil
}

// raiseDomain compares tok with the fence of its domain and raises the
// fence if tok is newer. Outcome is Accepted (raised or equal lease), Stale
// or Conflict. Its error is a storage error only.
func (s *Store) raiseDomain(tx *groupcommit.Tx, tok fence.Token) (Decision, error) {
	f, _, err := getDomainFence(tx, tok.Domain)
	if err != nil {
		return Decision{}, err
	}
	if f.Token.IsZero() {
		return s.putRaised(tx, tok)
	}
	cmp, err := tok.Compare(f.Token)
	if err != nil {
		return Decision{Outcome: WrongDomain, Fence: f.Token}, nil // cannot happen: same domain key
	}
	switch {
	case cmp < 0 && MutantNoFence: // a mutation build only: the comparison is off
		return Decision{Outcome: Accepted, Fence: f.Token}, nil
	case cmp < 0:
		return Decision{Outcome: Stale, Fence: f.Token}, nil
	case cmp == 0 && !tok.SameLease(f.Token):
		return Decision{Outcome: Conflict, Fence: f.Token}, nil
	case cmp == 0:
		return Decision{Outcome: Accepted, Fence: f.Token}, nil
	}
	return s.putRaised(tx, tok)
}

func (s *Store) putRaised(tx *groupcommit.Tx, tok fence.Token) (Decision, error) {
	if err := putDomainFence(tx, tok.Domain, Fence{Token: tok, RaisedAt: s.opts.Now()}); err != nil {
		return Decision{}, err
	}
	return Decision{Outcome: Accepted, Fence: tok, Raised: true}, nil
}

// commandDigest identifies a command for dedupe: its token position, op and
// args. A retry (same id) must match it.
func commandDigest(cmd Command) string {
	h := sha256.New()
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], cmd.Token.Epoch)
	binary.BigEndian.PutUint64(b[8:], cmd.Token.Seq)
	h.Write(b[:])
	h.Write([]byte(cmd.Token.Domain))
	h.Write([]byte{0})
	h.Write([]byte(cmd.Op))
	h.Write([]byte{0})
	h.Write(compactJSON(cmd.Args))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// compactJSON drops insignificant whitespace so that a retry re-encoded by
// another JSON library still matches; bytes that are not JSON stay as they are.
func compactJSON(b []byte) []byte {
	var out bytes.Buffer
	if len(b) == 0 || bytes.Equal(b, []byte("null")) || json.Compact(&out, b) != nil {
		if bytes.Equal(b, []byte("null")) {
			return nil
		}
		return b
	}
	return out.Bytes()
}

// Raise raises the fence of tok's domain to tok without a command — for a
// lease grant the agent saw announced before the new holder sent anything.
// The outcome is Accepted (Raised tells whether the fence moved), Stale or
// Conflict; it returns once the new fence is durable.
func (s *Store) Raise(ctx context.Context, tok fence.Token) (Decision, error) {
	if err := checkToken(tok); err != nil {
		return Decision{}, err
	}
	var d Decision
	err := s.w.Submit(ctx, "", func(tx *groupcommit.Tx) (bool, error) {
		var err error
		d, err = s.raiseDomain(tx, tok)
		return d.Raised, err
	})
	if err != nil {
		return Decision{}, err
	}
	return d, nil
}

// Rehome forgets a device's own fence record when the device was moved to
// another fencing domain (its record names the old one, so every command of
// the new domain would be WrongDomain). The fences of both domains and the
// device's journal stay. It reports whether there was a record to forget,
// once that is durable.
func (s *Store) Rehome(ctx context.Context, device, domain string) (bool, error) {
	if err := checkDevice(device); err != nil {
		return false, err
	}
	var moved bool
	err := s.w.Submit(ctx, device, func(tx *groupcommit.Tx) (bool, error) {
		f, ok, err := getFence(tx, device)
		if err != nil || !ok || f.Token.Domain == domain {
			return false, err
		}
		moved = true
		return true, tx.Bucket(bucketFences).Delete([]byte(device))
	})
	return moved, err
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
	return s.complete(ctx, device, id, result, false)
}

// complete moves an accepted command to StateDone with its result; inDoubt
// also lists it among the open in-doubt commands (CompleteInDoubt).
func (s *Store) complete(ctx context.Context, device, id string, result []byte, inDoubt bool) error {
	var logical error
	err := s.w.Submit(ctx, device, func(tx *groupcommit.Tx) (bool, error) {
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
		if !inDoubt {
			r.Args = nil // kept only while the command may need an operator's look
			return true, j.put(r)
		}
		return true, putInDoubt(tx, j, r)
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
	// The store keeps Raw and answers from the fields: they must be one
	// token, or a fence would be one position in memory and another after a
	// restart. (The signature was checked by whoever set Raw.)
	if wire, err := fence.ParseUnverified(tok.Raw); err != nil || wire != tok {
		return fmt.Errorf("%w: token fields do not match its wire form", ErrInvalid)
	}
	return nil
}

// cutoff is the store-clock stamp before which journal records are too old.
func (s *Store) cutoff() time.Time { return s.clock.now().Add(-s.opts.MaxAge) }
