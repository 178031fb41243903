package persist

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// State is where a journaled command stands.
type State string

const (
	// StateAccepted: the command passed the fence check and was made
	// durable; the driver may be applying it; no result yet.
	StateAccepted State = "accepted"
	// StateDone: the command has a durable result.
	StateDone State = "done"
	// StateInDoubt: the command was accepted but had no result when the
	// store was opened after the agent stopped; it may or may not have
	// reached the device.
	StateInDoubt State = "in_doubt"
	// StateResolved: an operator resolved the in-doubt command (Resolve);
	// Result holds the answer for retries, Resolution who decided what.
	StateResolved State = "resolved"
)

// Record is one journaled command.
type Record struct {
	ID         string
	State      State
	Token      fence.Fence // the lease (epoch, seq, holder) the command carried
	AcceptedAt time.Time
	DoneAt     time.Time // zero unless State is StateDone
	Result     []byte    // opaque result bytes; nil unless State is StateDone
	// Digest identifies the command (token position, op, args); a retry
	// must match it. Empty for records written before digests existed.
	Digest string
	// Idempotent: the driver declared the op idempotent when it was accepted.
	Idempotent bool
	// Op and Args are the command's op and args as accepted, kept so that an
	// operator can see what an in-doubt command was. Empty for records
	// written before they were kept.
	Op   string
	Args []byte
	// Resolution is the operator's decision; set only in StateResolved.
	Resolution *Resolution
	order      uint64    // position in the device's journal order
	stamp      time.Time // store-clock time of acceptance, for retention (order index)
}

// recordJSON is Record's stored form. Times are Unix milliseconds.
type recordJSON struct {
	State      State       `json:"state"`
	Token      fence.Fence `json:"token"`
	AcceptedAt int64       `json:"accepted_at"`
	DoneAt     int64       `json:"done_at,omitempty"`
	Result     []byte      `json:"result,omitempty"`
	Order      uint64      `json:"order"`
	Digest     string      `json:"digest,omitempty"`
	Idempotent bool        `json:"idempotent,omitempty"`
	Op         string      `json:"op,omitempty"`
	Args       []byte      `json:"args,omitempty"`
	Resolution *Resolution `json:"resolution,omitempty"`
}

func encodeRecord(r Record) ([]byte, error) {
	j := recordJSON{State: r.State, Token: r.Token, AcceptedAt: r.AcceptedAt.UnixMilli(), Result: r.Result, Order: r.order,
		Digest: r.Digest, Idempotent: r.Idempotent, Op: r.Op, Args: r.Args, Resolution: r.Resolution}
	if !r.DoneAt.IsZero() {
		j.DoneAt = r.DoneAt.UnixMilli()
	}
	return json.Marshal(j)
}

func decodeRecord(id string, b []byte) (Record, error) {
	var j recordJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return Record{}, fmt.Errorf("%w: journal %q: %w", ErrCorrupt, id, err)
	}
	r := Record{ID: id, State: j.State, Token: j.Token, AcceptedAt: time.UnixMilli(j.AcceptedAt),
		Result: j.Result, Digest: j.Digest, Idempotent: j.Idempotent, Op: j.Op, Args: j.Args, Resolution: j.Resolution,
		order: j.Order}
	if j.DoneAt != 0 {
		r.DoneAt = time.UnixMilli(j.DoneAt)
	}
	switch r.State {
	case StateAccepted, StateDone, StateInDoubt, StateResolved:
		return r, nil
	}
	return Record{}, fmt.Errorf("%w: journal %q: state %q", ErrCorrupt, id, j.State)
}

// Fence is a device's highest accepted token and when it was raised.
type Fence struct {
	Token    fence.Token
	RaisedAt time.Time
}

type fenceJSON struct {
	Token    string `json:"token"`
	RaisedAt int64  `json:"raised_at"`
}

// encodeFence encodes f, the fence kept in slot, for storage and remembers
// the result in fenceMemo, so that the next read of a just-raised fence is
// not a decode. Only a token that carries its wire form is remembered: its
// fields are what Sign or Verify decoded from Raw (checkToken holds every
// stored token to that), which is what decoding the stored bytes gives.
func encodeFence(slot fenceSlot, f Fence) ([]byte, error) {
	ms := f.RaisedAt.UnixMilli()
	b, err := json.Marshal(fenceJSON{Token: f.Token.Raw, RaisedAt: ms})
	if err == nil && f.Token.Raw != "" {
		rememberFence(slot, b, Fence{Token: f.Token, RaisedAt: time.UnixMilli(ms)})
	}
	return b, err
}

// fenceSlot names where a fence is stored: a device's record or a domain's
// fence (the two are kept apart, since a device and its domain often share
// a name).
type fenceSlot struct {
	domain bool
	name   string
}

func deviceSlot(device string) fenceSlot { return fenceSlot{name: device} }
func domainSlot(domain string) fenceSlot { return fenceSlot{domain: true, name: domain} }

// fenceMemo remembers, for each slot, the stored bytes last seen there and
// their decoded fence. A fence is read several times per command — the
// device's and the domain's in Accept, the domain's in every DomainFence —
// and its bytes change only when it is raised, while decoding (JSON, then
// the token's wire form) costs microseconds each time. A hit requires the
// very bytes being read, and a fence is a pure function of its bytes (Fence
// holds values and strings only), so a hit returns exactly what decoding
// would — whichever store or slot remembered it; errors are not
// remembered. One entry per slot: a raise replaces its slot's entry, so
// the memo holds live fences only, and an agent's working set (two per
// device with a domain each) fits up to 16,384 devices. It is bounded:
// when full it starts over, so with more live fences than it holds it only
// costs a map lookup per read.
var fenceMemo = struct {
	sync.Mutex
	m map[fenceSlot]memoFence
}{m: map[fenceSlot]memoFence{}}

type memoFence struct {
	stored string // the stored bytes
	f      Fence  // what they decode to; f.Token.Raw shares stored's memory
}

// fenceMemoMax bounds fenceMemo: an entry takes about 0.5 KiB with a
// typical token and at most about 1 KiB (stored bytes 525, shared with the
// decoded Raw; domain, holder and slot name 128 each), so 16 MiB typically
// and 32 MiB at the most.
const fenceMemoMax = 1 << 15

// decodeFence decodes the stored fence b of slot (its name is for the
// error), from fenceMemo when b is what the slot last held.
func decodeFence(slot fenceSlot, b []byte) (Fence, error) {
	fenceMemo.Lock()
	e, ok := fenceMemo.m[slot]
	fenceMemo.Unlock()
	if ok && e.stored == string(b) {
		return e.f, nil
	}
	f, err := parseFence(slot.name, b)
	if err != nil {
		return Fence{}, err
	}
	rememberFence(slot, b, f)
	return f, nil
}

// rememberFence records that slot holds the stored bytes b, which decode
// to f.
func rememberFence(slot fenceSlot, b []byte, f Fence) {
	stored := string(b)
	if i := strings.Index(stored, f.Token.Raw); i >= 0 && f.Token.Raw != "" {
		f.Token.Raw = stored[i : i+len(f.Token.Raw)] // same bytes, one copy kept
	}
	fenceMemo.Lock()
	defer fenceMemo.Unlock()
	if _, had := fenceMemo.m[slot]; !had && len(fenceMemo.m) >= fenceMemoMax {
		clear(fenceMemo.m)
	}
	fenceMemo.m[slot] = memoFence{stored: stored, f: f}
}

func parseFence(device string, b []byte) (Fence, error) {
	var j fenceJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return Fence{}, fmt.Errorf("%w: fence of %q: %w", ErrCorrupt, device, err)
	}
	// The token was verified before it was stored; the store is trusted.
	t, err := fence.ParseUnverified(j.Token)
	if err != nil {
		return Fence{}, fmt.Errorf("%w: fence of %q: %w", ErrCorrupt, device, err)
	}
	return Fence{Token: t, RaisedAt: time.UnixMilli(j.RaisedAt)}, nil
}
