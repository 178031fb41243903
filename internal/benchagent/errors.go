package benchagent

import "errors"

// Errors returned by the package; test with errors.Is.
var (
	// ErrNoAnswer: a command got no result in time.
	ErrNoAnswer = errors.New("benchagent: no answer")
	// ErrOutcome: a command was answered otherwise than applied/ok.
	ErrOutcome = errors.New("benchagent: unexpected result")
	// ErrInvalid: an argument is out of range.
	ErrInvalid = errors.New("benchagent: invalid argument")
)
