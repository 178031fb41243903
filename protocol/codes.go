package protocol

// Code is the precise reason of an answer: the "code" of an agent's Result
// and of the controller's lease Response. One type serves both; a string
// both sides use (bad_request, busy, expired, internal) is one constant.
// Codes are wire values and Prometheus label values: never rename one.
type Code string

// Result codes: the agent's answers to commands (DESIGN §5).
const (
	CodeOK           Code = "ok"
	CodeStaleToken   Code = "stale_token"   // a newer lease exists; the result's fence shows it
	CodeInvalidToken Code = "invalid_token" // bad signature, unknown key, undecodable
	CodeWrongDomain  Code = "wrong_domain"
	// CodeBadRequest: malformed JSON, a missing field, oversize; for a
	// lease request likewise.
	CodeBadRequest Code = "bad_request"
	// CodeExpired: a command's deadline_ms passed; renew: the lease
	// expired; acquire retry: that grant has ended.
	CodeExpired           Code = "expired"
	CodeUnknownOp         Code = "unknown_op"
	CodeDeviceError       Code = "device_error"
	CodeDeviceTimeout     Code = "device_timeout"
	CodeDeviceUnavailable Code = "device_unavailable"
	// CodeBusy: the device queue is full; for a lease request, too many
	// domains are in use (max_domains). Try again later.
	CodeBusy     Code = "busy"
	CodeInDoubt  Code = "in_doubt" // the command may or may not have taken effect
	CodeInternal Code = "internal"
)

// Lease codes: the outcome of a lease request, besides the shared
// CodeExpired, CodeBadRequest, CodeBusy and CodeInternal.
const (
	CodeGranted   Code = "granted"    // acquire: a new lease, or the same grant for a retried request id
	CodeRenewed   Code = "renewed"    // renew: the lease was extended
	CodeReleased  Code = "released"   // release: done; get: the domain is free
	CodeHeld      Code = "held"       // acquire: another holder has it; get: a live lease exists
	CodeNotHolder Code = "not_holder" // renew/release: the token is not the domain's current lease
)

// ResultCodes lists every code of an agent's Result, for metrics.
var ResultCodes = []Code{CodeOK, CodeStaleToken, CodeInvalidToken, CodeWrongDomain, CodeBadRequest, CodeExpired,
	CodeUnknownOp, CodeDeviceError, CodeDeviceTimeout, CodeDeviceUnavailable, CodeBusy, CodeInDoubt, CodeInternal}

// LeaseCodes lists every code of a lease Response, for metrics.
var LeaseCodes = []Code{CodeGranted, CodeRenewed, CodeReleased, CodeHeld, CodeNotHolder, CodeExpired,
	CodeBadRequest, CodeBusy, CodeInternal}
