package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/fencegate/fencegate/internal/groupcommit"
	"github.com/fencegate/fencegate/lease"
)

var (
	bucketMeta    = []byte("meta")
	bucketDomains = []byte("domains")
	keySchema     = []byte("schema")
	keyEpoch      = []byte("epoch")
	// schemaVersion 2 keeps each domain's requests in bucketRequests;
	// Open moves a schema 1 file's requests there (moveRequestsOut).
	schemaVersion  = []byte("2")
	schemaInRecord = []byte("1")
)

// DefaultLockTimeout is how long Open waits for another process's lock.
const DefaultLockTimeout = time.Second

// Options tune a Store. The zero value means defaults.
type Options struct {
	// LockTimeout is how long Open waits for the file lock held by another
	// process before failing with lease.ErrLocked. Default 1 s.
	LockTimeout time.Duration
	// Now gives the creation time that becomes a new file's epoch. Default
	// time.Now.
	Now func() time.Time
	// Epoch, if not 0, is the epoch of a new file instead of Now's Unix ms;
	// it is ignored for an existing file.
	Epoch uint64
	// OnCommit, if set, is called after each durable commit with the number
	// of writes in it and how long it took. It must not call the Store.
	OnCommit func(ops int, took time.Duration)
}

// Store is a lease.Store in one bbolt file. Safe for concurrent use.
type Store struct {
	db    *bolt.DB
	w     *groupcommit.Committer
	epoch uint64
}

var (
	_ lease.Store   = (*Store)(nil)
	_ lease.Scanner = (*Store)(nil)
)

// Open opens or creates (mode 0600) the store at path. A new file gets
// opts.Epoch or else the epoch Now().UnixMilli(), durable before Open
// returns; with a clock before the build date (lease.BuildFloor) and no
// opts.Epoch no file is created and the error wraps lease.ErrClockBehind.
func Open(path string, opts Options) (*Store, error) {
	_, statErr := os.Stat(path)
	fresh := errors.Is(statErr, os.ErrNotExist)
	db, err := openDB(path, opts)
	if err != nil {
		return nil, err
	}
	s, err := open(db, path, opts)
	if err != nil {
		db.Close()
		if fresh {
			os.Remove(path) // created by this call: leave nothing behind
			os.Remove(LogPath(path))
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return s, nil
}

// logSize is the length of the controller store's write-ahead log. A
// grant logs about 600 bytes (its record, the request it adds, the one
// it drops), so a checkpoint comes every 1,700 grants or so. The open
// transaction between checkpoints holds every insert in unsplit bbolt
// nodes, and each insert moves the node's entries after it: with the
// default 16 MiB log (28,000 grants a checkpoint) that copying was a
// fifth of a grant's CPU at 100 domains.
const logSize = 1 << 20

// LogPath is the write-ahead log kept beside the store file at path. Open
// replays it; a copy of the store file alone (Backup) needs none.
func LogPath(path string) string { return path + ".wal" }

func open(db *bolt.DB, path string, opts Options) (*Store, error) {
	log, err := groupcommit.OpenLog(db, LogPath(path), logSize)
	if err != nil {
		return nil, err
	}
	var epoch uint64
	err = db.Update(func(tx *bolt.Tx) error {
		epoch, err = initLayout(tx, newEpoch(opts))
		return err
	})
	if err != nil {
		log.Close()
		return nil, err
	}
	w, err := groupcommit.NewCommitter(db, groupcommit.CommitterOptions{OnCommit: opts.OnCommit, Log: log})
	if err != nil {
		log.Close()
		return nil, err
	}
	return &Store{db: db, w: w, epoch: epoch}, nil
}

func openDB(path string, opts Options) (*bolt.DB, error) {
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	db, err := groupcommit.OpenDB(path, 0o600, &bolt.Options{Timeout: timeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (waited %v)", lease.ErrLocked, path, timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// newEpoch returns the epoch a new file would get: opts.Epoch, or Now in
// Unix ms if the clock is plausible (else the error).
func newEpoch(opts Options) func() (uint64, error) {
	return func() (uint64, error) {
		if opts.Epoch != 0 {
			return opts.Epoch, nil
		}
		now := time.Now()
		if opts.Now != nil {
			now = opts.Now()
		}
		if err := lease.CheckCreationClock(now); err != nil {
			return 0, err
		}
		return uint64(max(now.UnixMilli(), 1)), nil
	}
}

// initLayout creates the buckets and epoch of a new file (from
// newEpoch) and returns the epoch.
func initLayout(tx *bolt.Tx, newEpoch func() (uint64, error)) (uint64, error) {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return 0, err
	}
	for _, name := range [][]byte{bucketDomains, bucketRequests} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return 0, err
		}
	}
	schema := meta.Get(keySchema)
	if schema != nil && !bytes.Equal(schema, schemaVersion) && !bytes.Equal(schema, schemaInRecord) {
		return 0, fmt.Errorf("%w: schema %q, want %q or %q", lease.ErrCorrupt, schema, schemaInRecord, schemaVersion)
	}
	if err := checkNotPending(meta); err != nil {
		return 0, err
	}
	if bytes.Equal(schema, schemaInRecord) {
		if err := moveRequestsOut(tx); err != nil {
			return 0, err
		}
	}
	if err := meta.Put(keySchema, schemaVersion); err != nil {
		return 0, err
	}
	if v := meta.Get(keyEpoch); v != nil {
		return decodeEpoch(v)
	}
	epoch, err := newEpoch()
	if err != nil {
		return 0, err
	}
	return epoch, meta.Put(keyEpoch, binary.BigEndian.AppendUint64(nil, epoch))
}

func decodeEpoch(v []byte) (uint64, error) {
	if len(v) != 8 || binary.BigEndian.Uint64(v) == 0 {
		return 0, fmt.Errorf("%w: epoch %x", lease.ErrCorrupt, v)
	}
	return binary.BigEndian.Uint64(v), nil
}

// Epoch returns the epoch read when the store was opened.
func (s *Store) Epoch(context.Context) (uint64, error) { return s.epoch, nil }

// Load returns domain's committed record.
func (s *Store) Load(_ context.Context, domain string) (lease.Record, error) {
	var rec lease.Record
	err := s.w.View(func(tx *groupcommit.Tx) error {
		var err error
		rec, err = get(tx, domain)
		return err
	})
	if err != nil {
		return lease.Record{}, fmt.Errorf("load %s: %w", domain, err)
	}
	return rec, nil
}

// Put stores rec if domain's record still has rec.Version; see lease.Store.
// Writes of concurrent callers are group-committed. The record (without
// its requests) is encoded here, in the caller's goroutine, with the
// version it will have: the single writer goroutine that every Put waits
// for compares the stored version, writes the bytes and brings the
// domain's stored requests in line with rec's, writing only the ones
// added or dropped. rec's requests must ascend strictly by seq
// (lease.Record); if not, Put fails with ErrRequestOrder and writes
// nothing. An empty domain fails with ErrEmptyDomain and writes nothing.
func (s *Store) Put(ctx context.Context, domain string, rec lease.Record) (lease.Record, error) {
	if domain == "" {
		return lease.Record{}, ErrEmptyDomain // bbolt keeps no empty key
	}
	if err := checkRequestOrder(rec.Requests); err != nil {
		return lease.Record{}, fmt.Errorf("put %s: %w", domain, err)
	}
	next := rec
	next.Version++
	head := next
	head.Requests = nil
	v := head.AppendJSON(nil) // json.Marshal(head), without reflection
	prefix := requestPrefix(domain)
	conflict := false
	err := s.w.Submit(ctx, domain, func(tx *groupcommit.Tx) (bool, error) {
		cur, err := storedVersion(tx, domain)
		if err != nil {
			return false, err
		}
		if cur != rec.Version {
			conflict = true
			return false, nil
		}
		if err := tx.Bucket(bucketDomains).Put([]byte(domain), v); err != nil {
			return false, err
		}
		return true, syncRequests(tx.Bucket(bucketRequests), prefix, rec.Requests)
	})
	switch {
	case err != nil:
		return lease.Record{}, fmt.Errorf("put %s: %w", domain, err)
	case conflict:
		return lease.Record{}, fmt.Errorf("put %s: %w", domain, lease.ErrConflict)
	}
	return next, nil
}

// Scan calls fn with every stored domain record in one read transaction
// (see lease.Scanner). A record that cannot be decoded fails the scan with
// lease.ErrCorrupt.
func (s *Store) Scan(_ context.Context, fn func(domain string, rec lease.Record) bool) error {
	err := s.w.View(func(tx *groupcommit.Tx) error {
		c := tx.Bucket(bucketDomains).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			rec, err := decode(tx, string(k), v)
			if err != nil {
				return err
			}
			if !fn(string(k), rec) {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	return nil
}

// Err returns nil, or the error that failed the store (a failed commit):
// it then accepts nothing more and must be reopened.
func (s *Store) Err() error { return s.w.Err() }

// Close waits for queued writes, checkpoints, then closes the file. A
// failed checkpoint is returned (its batches stay in the log, which the
// next Open replays) and the file is closed, its lock released, anyway.
func (s *Store) Close() error {
	err := s.w.Close()
	if errors.Is(err, groupcommit.ErrClosed) {
		return fmt.Errorf("close: %w", lease.ErrClosed)
	}
	if cerr := s.db.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

func get(tx *groupcommit.Tx, domain string) (lease.Record, error) {
	v := tx.Bucket(bucketDomains).Get([]byte(domain))
	if v == nil {
		return lease.Record{}, nil
	}
	return decode(tx, domain, v)
}

// decode returns domain's record from its stored bytes v and its requests
// in bucketRequests. A record that carries requests itself (the schema 1
// layout, which Open moves out) is lease.ErrCorrupt.
func decode(tx *groupcommit.Tx, domain string, v []byte) (lease.Record, error) {
	var rec lease.Record
	if err := json.Unmarshal(v, &rec); err != nil {
		return lease.Record{}, fmt.Errorf("%w: domain %q: %w", lease.ErrCorrupt, domain, err)
	}
	if rec.Requests != nil {
		return lease.Record{}, fmt.Errorf("%w: domain %q: record carries its requests (schema 1 layout)", lease.ErrCorrupt, domain)
	}
	reqs, err := loadRequests(tx.Bucket(bucketRequests), requestPrefix(domain), domain)
	if err != nil {
		return lease.Record{}, err
	}
	rec.Requests = reqs
	return rec, nil
}

// versionPrefix is how every record Put writes starts: lease.Record's
// first field is its version.
var versionPrefix = []byte(`{"version":`)

// storedVersion returns the version of domain's stored record (0 if none)
// without decoding the whole record: this runs in the single writer
// goroutine for every Put, and a full decode there was half the CPU of a
// grant when records still carried their requests. A record that does not
// start as Put writes it is decoded in full; one that does not decode is
// lease.ErrCorrupt.
func storedVersion(tx *groupcommit.Tx, domain string) (uint64, error) {
	v := tx.Bucket(bucketDomains).Get([]byte(domain))
	if v == nil {
		return 0, nil
	}
	if rest, ok := bytes.CutPrefix(v, versionPrefix); ok {
		if end := bytes.IndexAny(rest, ",}"); end > 0 {
			if n, err := strconv.ParseUint(string(rest[:end]), 10, 64); err == nil {
				return n, nil
			}
		}
	}
	var r struct {
		Version uint64 `json:"version"`
	}
	if err := json.Unmarshal(v, &r); err != nil {
		return 0, fmt.Errorf("%w: domain %q: %w", lease.ErrCorrupt, domain, err)
	}
	return r.Version, nil
}
