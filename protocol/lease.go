package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// Limits of protocol v1 lease requests.
const (
	// MinTTL and MaxTTL bound a lease's time to live.
	MinTTL = 100 * time.Millisecond
	MaxTTL = 24 * time.Hour
	// MaxWait bounds how long an acquire may wait for a held domain.
	MaxWait = 60 * time.Second
	// MaxRequestBytes bounds a request payload; larger ones are bad requests.
	MaxRequestBytes = 64 << 10
)

// ErrBadLeaseRequest: a lease request is malformed or out of range. Its
// message says which field and why; it is answered CodeBadRequest. (Its
// text, "lease: bad request", travels in responses' messages.)
var ErrBadLeaseRequest = errors.New("lease: bad request")

// LeaseOp names a lease operation; it is the last level of the request topic
// and of the HTTP path.
type LeaseOp string

// The lease operations.
const (
	OpAcquire LeaseOp = "acquire"
	OpRenew   LeaseOp = "renew"
	OpRelease LeaseOp = "release"
	OpGet     LeaseOp = "get"
)

// LeaseOps lists every operation, for metrics and subscriptions.
var LeaseOps = []LeaseOp{OpAcquire, OpRenew, OpRelease, OpGet}

// ParseLeaseOp returns the LeaseOp named s, or an error wrapping ErrBadLeaseRequest.
func ParseLeaseOp(s string) (LeaseOp, error) {
	for _, op := range LeaseOps {
		if string(op) == s {
			return op, nil
		}
	}
	return "", fmt.Errorf("%w: unknown op %q (want acquire, renew, release or get)", ErrBadLeaseRequest, s)
}

// Request is a lease request as it travels in JSON (DESIGN §5). Which
// fields an operation needs is checked by Validate.
type Request struct {
	RequestID string `json:"request_id,omitempty"`
	ReplyTo   string `json:"reply_to,omitempty"` // MQTT only: where the response goes
	Holder    string `json:"holder,omitempty"`
	TTLms     uint64 `json:"ttl_ms,omitempty"`
	WaitMs    uint64 `json:"wait_ms,omitempty"`
	Token     string `json:"token,omitempty"`
}

// Response is the answer to a Request. OK is true for granted, renewed,
// released, and for a get that found the domain (held or free).
type Response struct {
	RequestID   string `json:"request_id"`
	OK          bool   `json:"ok"`
	Code        Code   `json:"code"`
	Token       string `json:"token,omitempty"`
	Holder      string `json:"holder,omitempty"`
	ExpiresInMs int64  `json:"expires_in_ms,omitempty"`
	// WaitedMs, on a grant after a wait_ms wait, is how long the request
	// waited before the attempt that granted began: a client that counts
	// the TTL from when it sent the request adds it (never past the truth).
	WaitedMs int64 `json:"waited_ms,omitempty"`
	// Message explains a bad_request or internal code; it is not part of
	// the contract and may change.
	Message string `json:"message,omitempty"`
}

// DecodeRequest parses a JSON request payload. Unknown fields are ignored
// (forward compatibility); a payload over MaxRequestBytes, malformed JSON or
// a field of the wrong type is an error wrapping ErrBadLeaseRequest.
func DecodeRequest(payload []byte) (Request, error) {
	if len(payload) > MaxRequestBytes {
		return Request{}, fmt.Errorf("%w: payload is %d bytes, at most %d", ErrBadLeaseRequest, len(payload), MaxRequestBytes)
	}
	var r Request
	if err := json.Unmarshal(payload, &r); err != nil {
		return Request{}, fmt.Errorf("%w: %w", ErrBadLeaseRequest, err)
	}
	return r, nil
}

// Validate checks that r has what op needs: acquire a request id, holder,
// TTL and optional wait; renew a token and optional TTL; release a token;
// get nothing. Errors wrap ErrBadLeaseRequest and name the field.
func (r Request) Validate(op LeaseOp) error {
	if r.RequestID != "" {
		if err := fence.CheckID("request_id", r.RequestID); err != nil {
			return fmt.Errorf("%w: %w", ErrBadLeaseRequest, err)
		}
	}
	if r.Holder != "" {
		if err := fence.CheckID("holder", r.Holder); err != nil {
			return fmt.Errorf("%w: %w", ErrBadLeaseRequest, err)
		}
	}
	switch op {
	case OpAcquire:
		return r.validateAcquire()
	case OpRenew:
		return r.validateRenew()
	case OpRelease:
		return r.needToken()
	case OpGet:
		return nil
	}
	_, err := ParseLeaseOp(string(op))
	return err
}

func (r Request) validateAcquire() error {
	switch {
	case r.RequestID == "":
		return fmt.Errorf("%w: request_id is missing", ErrBadLeaseRequest)
	case r.Holder == "":
		return fmt.Errorf("%w: holder is missing", ErrBadLeaseRequest)
	case r.TTLms == 0:
		return fmt.Errorf("%w: ttl_ms is missing", ErrBadLeaseRequest)
	case r.WaitMs > uint64(MaxWait.Milliseconds()):
		return fmt.Errorf("%w: wait_ms %d is over %d", ErrBadLeaseRequest, r.WaitMs, MaxWait.Milliseconds())
	}
	return CheckTTL(r.TTLms)
}

func (r Request) validateRenew() error {
	if err := r.needToken(); err != nil {
		return err
	}
	if r.TTLms == 0 {
		return nil
	}
	return CheckTTL(r.TTLms)
}

func (r Request) needToken() error {
	if r.Token == "" {
		return fmt.Errorf("%w: token is missing", ErrBadLeaseRequest)
	}
	return nil
}

// CheckTTL returns nil if ms is within MinTTL..MaxTTL and otherwise an error
// wrapping ErrBadLeaseRequest that states the bounds.
func CheckTTL(ms uint64) error {
	lo, hi := uint64(MinTTL.Milliseconds()), uint64(MaxTTL.Milliseconds())
	if ms < lo || ms > hi {
		return fmt.Errorf("%w: ttl_ms %d is outside %d..%d (100 ms to 24 h)", ErrBadLeaseRequest, ms, lo, hi)
	}
	return nil
}
