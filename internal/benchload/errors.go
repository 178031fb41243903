package benchload

import "errors"

// Errors returned by the package; test with errors.Is.
var (
	// ErrInvalid: an argument is out of range (devices < 1, a Limit with
	// neither or both bounds).
	ErrInvalid = errors.New("benchload: invalid argument")
	// ErrOutcome: an Accept was answered otherwise than Accepted, so the
	// operation was not the durable write the workload measures.
	ErrOutcome = errors.New("benchload: unexpected accept outcome")
)
