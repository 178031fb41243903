package persist

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fencegate/fencegate/internal/groupcommit"
)

// ErrNotInDoubt: Resolve named a command that is not an open in-doubt
// command (unknown, pruned, done, or already resolved). Nothing changed.
var ErrNotInDoubt = errors.New("persist: command is not an open in-doubt command")

// bucketInDoubt indexes the open in-doubt commands: device NUL id → "". A
// command enters it when Open marks it in_doubt or CompleteInDoubt records
// an in-doubt result, and leaves it when it is resolved, re-accepted (an
// idempotent op) or pruned with the journal window — by count only: age
// alone never prunes an open in-doubt command (see pruneDevice).
var bucketInDoubt = []byte("indoubt")

// Resolution is an operator's decision on an in-doubt command, journaled
// with who made it and when.
type Resolution struct {
	// Applied: the operator found that the command took effect.
	Applied bool `json:"applied"`
	// By names the operator (free text, 1..128 bytes of UTF-8 without
	// control characters).
	By string `json:"by"`
	// At is when the resolution was journaled (wall clock, ms precision).
	At time.Time `json:"at"`
}

// MaxResolverLen bounds Resolution.By, in bytes.
const MaxResolverLen = 128

// InDoubtCommand is one open in-doubt command with its journal record.
type InDoubtCommand struct {
	Device string
	Record Record
}

// initInDoubtIndex creates the index on first use, filling it from the
// journal's in_doubt records (a file from before the index).
func initInDoubtIndex(tx *groupcommit.Tx) error {
	if tx.Bucket(bucketInDoubt) != nil {
		return nil
	}
	idx, err := tx.CreateBucketIfNotExists(bucketInDoubt)
	if err != nil {
		return fmt.Errorf("init in-doubt index: %w", err)
	}
	return tx.Bucket(bucketJournal).ForEach(func(k, v []byte) error {
		device, id, ok := splitDeviceKey(k)
		if !ok {
			return fmt.Errorf("%w: journal key %q", ErrCorrupt, k)
		}
		r, err := decodeRecord(id, v)
		if err != nil || r.State != StateInDoubt {
			return err
		}
		return idx.Put(journalFor(tx, device).key([]byte(id)), indexMark)
	})
}

// putInDoubt stores r and lists it as open in doubt.
func putInDoubt(tx *groupcommit.Tx, j journal, r Record) error {
	if err := j.put(r); err != nil {
		return err
	}
	if err := tx.Bucket(bucketInDoubt).Put(j.key([]byte(r.ID)), indexMark); err != nil {
		return fmt.Errorf("in-doubt index %q: %w", r.ID, err)
	}
	return nil
}

func unindexInDoubt(tx *groupcommit.Tx, j journal, id string) error {
	if err := tx.Bucket(bucketInDoubt).Delete(j.key([]byte(id))); err != nil {
		return fmt.Errorf("in-doubt index %q: %w", id, err)
	}
	return nil
}

// CompleteInDoubt is Complete for a result that leaves the command in
// doubt (the driver lost the device after the command may have left): the
// result answers retries as Complete's does, and the command is listed
// open in doubt until an operator resolves it.
func (s *Store) CompleteInDoubt(ctx context.Context, device, id string, result []byte) error {
	if err := checkDevice(device); err != nil {
		return err
	}
	if err := checkCommandID(id); err != nil {
		return err
	}
	return s.complete(ctx, device, id, result, true)
}

// InDoubt lists the open in-doubt commands, by device and then journal
// order. It reads committed state only.
func (s *Store) InDoubt() ([]InDoubtCommand, error) {
	var out []InDoubtCommand
	err := s.view(func(tx *groupcommit.Tx) error {
		return tx.Bucket(bucketInDoubt).ForEach(func(k, _ []byte) error {
			device, id, ok := splitDeviceKey(k)
			if !ok {
				return fmt.Errorf("%w: in-doubt key %q", ErrCorrupt, k)
			}
			r, found, err := journalFor(tx, device).get(id)
			if err != nil || !found {
				return err
			}
			out = append(out, InDoubtCommand{Device: device, Record: r})
			return nil
		})
	})
	return out, err
}

// InDoubtCounts returns the number of open in-doubt commands by device
// (devices with none are absent).
func (s *Store) InDoubtCounts() (map[string]int, error) {
	out := map[string]int{}
	err := s.view(func(tx *groupcommit.Tx) error {
		return tx.Bucket(bucketInDoubt).ForEach(func(k, _ []byte) error {
			if device, _, ok := splitDeviceKey(k); ok {
				out[device]++
			}
			return nil
		})
	})
	return out, err
}

// Resolve journals an operator's resolution of an open in-doubt command
// and returns once it is durable (fsynced). The record moves to
// StateResolved with res (At is set to the wall clock, Options.Now) and result — the
// answer a retry of the command gets from then on, opaque to the store —
// and leaves the in-doubt list. A command that is not open in doubt gets
// ErrNotInDoubt and nothing changes.
func (s *Store) Resolve(ctx context.Context, device, id string, res Resolution, result []byte) (Record, error) {
	if err := checkResolve(device, id, res); err != nil {
		return Record{}, err
	}
	res.At = s.opts.Now().Truncate(time.Millisecond)
	var (
		out     Record
		logical error
	)
	err := s.w.Submit(ctx, device, func(tx *groupcommit.Tx) (bool, error) {
		j := journalFor(tx, device)
		r, ok, err := j.get(id)
		if err != nil {
			return false, err
		}
		if !ok || !has(tx.Bucket(bucketInDoubt), j.key([]byte(id))) {
			logical = fmt.Errorf("%w: %s/%s is %s", ErrNotInDoubt, device, id, stateOf(r, ok))
			return false, nil
		}
		r.State, r.Resolution, r.Result = StateResolved, &res, append([]byte(nil), result...)
		out = r
		if err := j.put(r); err != nil {
			return false, err
		}
		return true, unindexInDoubt(tx, j, id)
	})
	if err != nil {
		return Record{}, err
	}
	return out, logical
}

func checkResolve(device, id string, res Resolution) error {
	if err := checkDevice(device); err != nil {
		return err
	}
	if err := checkCommandID(id); err != nil {
		return err
	}
	if res.By == "" || len(res.By) > MaxResolverLen {
		return fmt.Errorf("%w: resolver is %d bytes, want 1..%d", ErrInvalid, len(res.By), MaxResolverLen)
	}
	if !utf8.ValidString(res.By) || strings.IndexFunc(res.By, unicode.IsControl) >= 0 {
		return fmt.Errorf("%w: resolver %q holds control characters or is not UTF-8", ErrInvalid, res.By)
	}
	return nil
}
