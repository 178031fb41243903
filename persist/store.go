package persist

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/fencegate/fencegate/internal/groupcommit"
)

// Store is the agent's durable fence store. Its methods are safe for
// concurrent use. Writes are serialized by one writer goroutine and
// group-committed; reads run in their own read-only transactions and see
// only committed state.
type Store struct {
	db    *bolt.DB
	path  string
	opts  Options
	w     *groupcommit.Committer
	clock storeClock // retention's clock: never stepped by the wall clock

	inDoubt []DeviceCommand // set by Open, read-only after
	pins    pins            // records a waiting retry keeps from pruning
	domains durableFences   // every domain's durable fence, for DomainFence
}

// DeviceCommand names one command of one device.
type DeviceCommand struct {
	Device string
	ID     string
}

// Open opens (or creates, mode 0600) the store file at path. If another
// process holds the file, Open fails with ErrLocked after opts.LockTimeout.
// Commands found accepted without a result — the agent stopped while they
// were in flight — are marked in_doubt; InDoubtAtOpen lists them.
func Open(path string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	db, err := groupcommit.OpenDB(path, 0o600, &bolt.Options{Timeout: opts.LockTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (waited %v)", ErrLocked, path, opts.LockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.NoSync = MutantNoSync // false but in the power-loss harness's mutation build (fencegate_mutant_nosync)
	s := &Store{db: db, path: path, opts: opts}
	if err := s.open(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return s, nil
}

// logSize is the length of the fence store's write-ahead log. A command
// logs 650 bytes (1,060 when it raises the fence), so a checkpoint comes
// every 1,000–1,600 commands. Measured with 100 devices keeping 1,000
// records each (80 MiB of file without the log): the file levels off at
// 83 MiB with a 1 MiB log and 108 MiB with 4 MiB, and kept growing with
// 16 MiB (256 MiB after 800,000 commands), as each checkpoint rewrote
// pages all over the journal; the p99 at 1,000 devices was also lower with
// 1 MiB than with 4 (docs/benchmarks.md).
const logSize = 1 << 20

// LogPath is the write-ahead log kept beside the store file at path: Open
// replays it before anything reads the store. A copy made by Backup is
// whole without it; a copy of a stopped agent's fence.db is not (copy both,
// or open the store once and Close it: Close leaves the log empty).
func LogPath(path string) string { return path + ".wal" }

// open replays the log, recovers (layout, in-doubt marking, pruning) in
// one bbolt commit, and starts the writer.
func (s *Store) open() error {
	log, err := groupcommit.OpenLog(s.db, LogPath(s.path), logSize)
	if err != nil {
		return err
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return s.recover(groupcommit.Wrap(tx)) }); err != nil {
		log.Close()
		return err
	}
	s.w, err = groupcommit.NewCommitter(s.db, groupcommit.CommitterOptions{MaxBatch: s.opts.MaxBatch, BeforeCommit: s.opts.beforeCommit, OnCommit: s.opts.OnCommit, AfterBatch: s.pruneDevices, Log: log, OnDurable: s.domains.onDurable})
	if err != nil {
		log.Close()
		return err
	}
	return nil
}

// recover prepares the file for use: layout, in-doubt marking, pruning.
func (s *Store) recover(tx *groupcommit.Tx) error {
	if _, err := initLayout(tx); err != nil {
		return err
	}
	s.clock = newStoreClock(tx, s.opts.Uptime)
	if err := initInDoubtIndex(tx); err != nil {
		return err
	}
	if err := s.markInDoubt(tx); err != nil {
		return err
	}
	if _, err := s.pruneDevices(tx, fencedDevices(tx)); err != nil {
		return err
	}
	return s.domains.load(tx)
}

// markInDoubt turns every pending (accepted, no result) command into
// in_doubt: the agent stopped while it was in flight.
func (s *Store) markInDoubt(tx *groupcommit.Tx) error {
	var pending []DeviceCommand
	err := tx.Bucket(bucketPending).ForEach(func(k, _ []byte) error {
		device, id, ok := splitDeviceKey(k)
		if !ok {
			return fmt.Errorf("%w: pending key %q", ErrCorrupt, k)
		}
		pending = append(pending, DeviceCommand{Device: device, ID: id})
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range pending {
		j := journalFor(tx, c.Device)
		r, ok, err := j.get(c.ID)
		if err != nil {
			return err
		}
		if !ok || r.State != StateAccepted {
			return fmt.Errorf("%w: pending %s/%s has no accepted record", ErrCorrupt, c.Device, c.ID)
		}
		r.State = StateInDoubt
		if err := putInDoubt(tx, j, r); err != nil {
			return err
		}
	}
	s.inDoubt = pending
	return nil
}

// InDoubtAtOpen lists the commands Open marked in_doubt.
func (s *Store) InDoubtAtOpen() []DeviceCommand {
	return append([]DeviceCommand(nil), s.inDoubt...)
}

// Close stops taking new operations, waits until every queued one has
// committed and its caller is released, then closes the file. Calling Close
// again returns ErrClosed.
func (s *Store) Close() error {
	err := s.w.Close()
	if errors.Is(err, groupcommit.ErrClosed) {
		return err
	}
	// A failed last checkpoint leaves its batches in the log (the next Open
	// replays them); the file is closed, and its lock released, either way.
	if cerr := s.db.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// Path returns the store file's path.
func (s *Store) Path() string { return s.path }
