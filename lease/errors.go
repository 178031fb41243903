package lease

import (
	"errors"

	"github.com/fencegate/fencegate/protocol"
)

// Errors of the lease package; test with errors.Is.
var (
	// ErrBadRequest: a request is malformed or out of range. Its message
	// says which field and why; it is answered CodeBadRequest. It is
	// protocol.ErrBadLeaseRequest, which the request decoding wraps too.
	ErrBadRequest = protocol.ErrBadLeaseRequest
	// ErrConflict: a Store's compare-and-put found a record newer than the
	// one the caller read (another writer got there first).
	ErrConflict = errors.New("lease: store record changed concurrently")
	// ErrCorrupt: a stored record cannot be decoded.
	ErrCorrupt = errors.New("lease: corrupt store record")
	// ErrLocked: another process holds the store.
	ErrLocked = errors.New("lease: store is locked by another process")
	// ErrClosed: the controller or store has been closed.
	ErrClosed = errors.New("lease: closed")
	// ErrBusy: the controller holds MaxDomains domains and none is idle;
	// it is answered CodeBusy.
	ErrBusy = errors.New("lease: busy")
	// ErrClockBehind: a new store would take its epoch from a clock that
	// reads before the build date (BuildFloor); give the epoch explicitly.
	ErrClockBehind = errors.New("lease: clock is before the build date")
	// ErrEpochBehind: an epoch seen outside the store (a retained grant,
	// an agent's device state) is above the store's; the controller grants
	// nothing in the domain until the epoch is bumped. It is answered
	// CodeInternal with the message.
	ErrEpochBehind = errors.New("lease: store epoch is behind an observed one")
	// ErrConfig: a Config cannot work; the message names the field.
	ErrConfig = errors.New("lease: invalid config")
)
