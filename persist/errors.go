package persist

import (
	"errors"

	"github.com/fencegate/fencegate/internal/groupcommit"
)

// Errors returned by the store; test with errors.Is.
var (
	// ErrFailed: a commit failed earlier; the store accepts nothing more and
	// must be closed and reopened. The first failure's cause is wrapped too.
	// (The group-commit writer's own sentinel.)
	ErrFailed = groupcommit.ErrFailed
	// ErrClosed: the store has been closed.
	ErrClosed = groupcommit.ErrClosed
	// ErrLocked: another process holds the store file.
	ErrLocked = errors.New("persist: store file is locked by another process")
	// ErrNotAccepted: a result was recorded for a command that is not in the
	// journal as accepted (unknown, already done, or in doubt).
	ErrNotAccepted = errors.New("persist: command is not accepted")
	// ErrCorrupt: a stored record cannot be decoded.
	ErrCorrupt = errors.New("persist: corrupt record")
	// ErrInvalid: an argument is invalid (bad device or command id, zero token).
	ErrInvalid = errors.New("persist: invalid argument")
)
