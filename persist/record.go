package persist

import (
	"encoding/json"
	"fmt"
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

// encodeFence encodes f for storage and remembers the result in fenceMemo,
// so that the next read of a just-raised fence is not a decode. Only a token
// that carries its wire form is remembered: its fields are what Sign or
// Verify decoded from Raw (checkToken holds every stored token to that),
// which is what decoding the stored bytes gives.
func encodeFence(f Fence) ([]byte, error) {
	ms := f.RaisedAt.UnixMilli()
	b, err := json.Marshal(fenceJSON{Token: f.Token.Raw, RaisedAt: ms})
	if err == nil && f.Token.Raw != "" {
		rememberFence(b, Fence{Token: f.Token, RaisedAt: time.UnixMilli(ms)})
	}
	return b, err
}

// fenceMemo remembers decoded fences by their stored bytes. A fence is
// read several times per command — the device's and the domain's in
// Accept, the domain's in every DomainFence — and its bytes change only
// when it is raised, while decoding (JSON, then the token's wire form)
// costs microseconds each time. A fence is a pure function of its bytes
// (Fence holds values and strings only), so a hit returns exactly what
// decoding would; errors are not remembered. The memo is bounded: when
// full it starts over, so with more live fences than it holds it only
// costs a map lookup per read.
var fenceMemo = struct {
	sync.Mutex
	m map[string]Fence
}{m: map[string]Fence{}}

// fenceMemoMax bounds fenceMemo: with a token of about 1 KiB (stored bytes
// and Raw), about 8 MiB at the most.
const fenceMemoMax = 4096

// decodeFence decodes a stored fence of a device or domain (name, for the
// error), from fenceMemo when these bytes were decoded before.
func decodeFence(name string, b []byte) (Fence, error) {
	fenceMemo.Lock()
	f, ok := fenceMemo.m[string(b)]
	fenceMemo.Unlock()
	if ok {
		return f, nil
	}
	f, err := parseFence(name, b)
	if err != nil {
		return Fence{}, err
	}
	rememberFence(b, f)
	return f, nil
}

// rememberFence records that the stored bytes b decode to f.
func rememberFence(b []byte, f Fence) {
	fenceMemo.Lock()
	if len(fenceMemo.m) >= fenceMemoMax {
		clear(fenceMemo.m)
	}
	fenceMemo.m[string(b)] = f
	fenceMemo.Unlock()
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
