// Package persist is the edge agent's durable fence store, kept in one bbolt
// file.
//
// Per device it holds the highest accepted fencing token and a journal of
// commands keyed by command id (accepted → done with its result bytes, or
// in_doubt when the store is opened after a crash and a command has no
// result; resolved once an operator has said whether an in-doubt command
// took effect, see Resolve).
// Accept is the one operation the agent makes for every command: it
// answers from the journal, rejects a stale token, or raises the fence and
// journals the command — and returns only after that decision is fsynced
// (invariants I2, I3 and I4 of the design).
//
// Every write goes through one writer goroutine that applies everything
// queued in a single bbolt read-write transaction and commits as soon as the
// queue is empty: no timer, so a lone caller pays one fsync and a hundred
// concurrent callers share one. A failed commit puts the store in a failed
// state: every later call returns ErrFailed (fail-stop).
package persist
