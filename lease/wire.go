package lease

import (
	"encoding/json"
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

// Op names a lease operation; it is the last level of the request topic
// and of the HTTP path.
type Op string

// The lease operations.
const (
	OpAcquire Op = "acquire"
	OpRenew   Op = "renew"
	OpRelease Op = "release"
	OpGet     Op = "get"
)

// Ops lists every operation, for metrics and subscriptions.
var Ops = []Op{OpAcquire, OpRenew, OpRelease, OpGet}

// ParseOp returns the Op named s, or an error wrapping ErrBadRequest.
func ParseOp(s string) (Op, error) {
	for _, op := range Ops {
		if string(op) == s {
			return op, nil
		}
	}
	return "", fmt.Errorf("%w: unknown op %q (want acquire, renew, release or get)", ErrBadRequest, s)
}

// Code is the outcome of a lease request, the response's "code".
type Code string

// The response codes of protocol v1.
const (
	CodeGranted    Code = "granted"    // acquire: a new lease, or the same grant for a retried request id
	CodeRenewed    Code = "renewed"    // renew: the lease was extended
	CodeReleased   Code = "released"   // release: done; get: the domain is free
	CodeHeld       Code = "held"       // acquire: another holder has it; get: a live lease exists
	CodeNotHolder  Code = "not_holder" // renew/release: the token is not the domain's current lease
	CodeExpired    Code = "expired"    // renew: the lease expired; acquire retry: that grant has ended
	CodeBadRequest Code = "bad_request"
	CodeBusy       Code = "busy" // too many domains in use (max_domains); try again later
	CodeInternal   Code = "internal"
)

// Codes lists every code, for metrics.
var Codes = []Code{CodeGranted, CodeRenewed, CodeReleased, CodeHeld, CodeNotHolder, CodeExpired, CodeBadRequest, CodeBusy, CodeInternal}

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
// a field of the wrong type is an error wrapping ErrBadRequest.
func DecodeRequest(payload []byte) (Request, error) {
	if len(payload) > MaxRequestBytes {
		return Request{}, fmt.Errorf("%w: payload is %d bytes, at most %d", ErrBadRequest, len(payload), MaxRequestBytes)
	}
	var r Request
	if err := json.Unmarshal(payload, &r); err != nil {
		return Request{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return r, nil
}

// PeekReply extracts request_id and reply_to from a payload that
// DecodeRequest rejected, so the rejection can still be answered. Fields
// that are missing or not strings come back empty.
func PeekReply(payload []byte) (requestID, replyTo string) {
	var m map[string]json.RawMessage
	if json.Unmarshal(payload, &m) != nil {
		return "", ""
	}
	json.Unmarshal(m["request_id"], &requestID)
	json.Unmarshal(m["reply_to"], &replyTo)
	return requestID, replyTo
}

// Validate checks that r has what op needs: acquire a request id, holder,
// TTL and optional wait; renew a token and optional TTL; release a token;
// get nothing. Errors wrap ErrBadRequest and name the field.
func (r Request) Validate(op Op) error {
	if r.RequestID != "" {
		if err := fence.CheckID("request_id", r.RequestID); err != nil {
			return fmt.Errorf("%w: %v", ErrBadRequest, err)
		}
	}
	if r.Holder != "" {
		if err := fence.CheckID("holder", r.Holder); err != nil {
			return fmt.Errorf("%w: %v", ErrBadRequest, err)
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
	_, err := ParseOp(string(op))
	return err
}

func (r Request) validateAcquire() error {
	switch {
	case r.RequestID == "":
		return fmt.Errorf("%w: request_id is missing", ErrBadRequest)
	case r.Holder == "":
		return fmt.Errorf("%w: holder is missing", ErrBadRequest)
	case r.TTLms == 0:
		return fmt.Errorf("%w: ttl_ms is missing", ErrBadRequest)
	case r.WaitMs > uint64(MaxWait.Milliseconds()):
		return fmt.Errorf("%w: wait_ms %d is over %d", ErrBadRequest, r.WaitMs, MaxWait.Milliseconds())
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
		return fmt.Errorf("%w: token is missing", ErrBadRequest)
	}
	return nil
}

// CheckTTL returns nil if ms is within MinTTL..MaxTTL and otherwise an error
// wrapping ErrBadRequest that states the bounds.
func CheckTTL(ms uint64) error {
	lo, hi := uint64(MinTTL.Milliseconds()), uint64(MaxTTL.Milliseconds())
	if ms < lo || ms > hi {
		return fmt.Errorf("%w: ttl_ms %d is outside %d..%d (100 ms to 24 h)", ErrBadRequest, ms, lo, hi)
	}
	return nil
}
