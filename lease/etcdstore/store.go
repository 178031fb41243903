package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/lease"
)

// Options tune a Store built on a client by New. The zero value means
// defaults.
type Options struct {
	// Prefix as in Config. Default "fencegate/".
	Prefix string
	// RequestTimeout as in Config. Default 5 s.
	RequestTimeout time.Duration
	// Now gives the time whose Unix ms becomes the epoch of a new store.
	// Default time.Now.
	Now func() time.Time
}

// Store is a lease.Store (and lease.Shared) in etcd. Safe for concurrent
// use, by any number of Stores on the same prefix in any processes.
type Store struct {
	cli     *clientv3.Client
	owned   bool // Close closes cli
	keys    keys
	timeout time.Duration
	epoch   uint64
	epochV  string // the epoch key's value, compared in every Put

	failed atomic.Pointer[error] // ErrEpochChanged once a Put found it
	closed atomic.Bool
}

var _ lease.Shared = (*Store)(nil)

// Open connects to the cluster of cfg and opens the store under its
// prefix, creating the epoch (now in Unix ms) if the prefix has none. The
// Store owns the client. ctx bounds the opening.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate("etcd"); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cc, err := cfg.clientConfig()
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	s, err := New(ctx, cli, Options{Prefix: cfg.Prefix, RequestTimeout: cfg.RequestTimeout})
	if err != nil {
		cli.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// New opens the store under opts.Prefix on cli, which the caller keeps and
// closes after the Store. It reads the epoch, creating it if absent.
func New(ctx context.Context, cli *clientv3.Client, opts Options) (*Store, error) {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Store{cli: cli, keys: keys{opts.Prefix}, timeout: opts.RequestTimeout}
	if err := s.initEpoch(ctx, opts.Now()); err != nil {
		return nil, err
	}
	return s, nil
}

// initEpoch reads the epoch, or creates it as created's Unix ms if no
// replica did first.
func (s *Store) initEpoch(ctx context.Context, created time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	k := s.keys.epoch()
	fresh := strconv.FormatUint(uint64(max(created.UnixMilli(), 1)), 10)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, fresh)).Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return fmt.Errorf("open: epoch: %w", err)
	}
	s.epochV = fresh
	if !resp.Succeeded {
		s.epochV = string(resp.Responses[0].GetResponseRange().Kvs[0].Value)
	}
	s.epoch, err = parseEpoch(s.epochV)
	return err
}

// Epoch returns the epoch read (or created) at Open.
func (s *Store) Epoch(context.Context) (uint64, error) { return s.epoch, nil }

// Shared reports true: several controllers use one etcd store at once.
func (s *Store) Shared() bool { return true }

// Load reads domain's record linearizably (through the etcd leader).
func (s *Store) Load(ctx context.Context, domain string) (lease.Record, error) {
	if s.closed.Load() {
		return lease.Record{}, fmt.Errorf("load %s: %w", domain, lease.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.keys.domain(domain))
	if err != nil {
		return lease.Record{}, fmt.Errorf("load %s: %w", domain, err)
	}
	if len(resp.Kvs) == 0 {
		return lease.Record{}, nil
	}
	return decode(domain, resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
}

// Put stores rec if domain's record still has rec.Version and the epoch is
// still the one read at Open; see lease.Store and the package doc. A ctx
// already done fails Put before anything is sent; once sent, the
// transaction runs to its outcome or RequestTimeout, whatever ctx does. An
// error other than lease.ErrConflict and ErrEpochChanged (a timeout, a lost
// quorum) leaves the outcome unknown: the write may have been applied.
func (s *Store) Put(ctx context.Context, domain string, rec lease.Record) (lease.Record, error) {
	if err := s.writable(ctx); err != nil {
		return lease.Record{}, fmt.Errorf("put %s: %w", domain, err)
	}
	if rec.Version > math.MaxInt64 {
		return lease.Record{}, fmt.Errorf("put %s: %w", domain, lease.ErrConflict)
	}
	val, err := encode(rec)
	if err != nil {
		return lease.Record{}, fmt.Errorf("put %s: %w", domain, err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	k := s.keys.domain(domain)
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(k), "=", int64(rec.Version)),
		clientv3.Compare(clientv3.Value(s.keys.epoch()), "=", s.epochV),
	).Then(clientv3.OpPut(k, val)).Else(clientv3.OpGet(s.keys.epoch())).Commit()
	if err != nil {
		return lease.Record{}, fmt.Errorf("put %s: %w", domain, err)
	}
	if !resp.Succeeded {
		return lease.Record{}, fmt.Errorf("put %s: %w", domain, s.whyNot(resp))
	}
	rec.Version = uint64(resp.Header.Revision)
	return rec, nil
}

// writable reports why nothing may be written now, if anything.
func (s *Store) writable(ctx context.Context) error {
	switch {
	case s.closed.Load():
		return lease.ErrClosed
	case s.Err() != nil:
		return s.Err()
	}
	return ctx.Err()
}

// whyNot explains a failed Put transaction from its Else read of the
// epoch: ErrEpochChanged (remembered: the store is done) or
// lease.ErrConflict.
func (s *Store) whyNot(resp *clientv3.TxnResponse) error {
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 1 && string(kvs[0].Value) == s.epochV {
		return lease.ErrConflict
	}
	got := "none"
	if len(kvs) == 1 {
		got = string(kvs[0].Value)
	}
	err := fmt.Errorf("%w: opened at %s, now %s", ErrEpochChanged, s.epochV, got)
	s.failed.CompareAndSwap(nil, &err)
	return err
}

// Err returns nil, or the error that ended the store: ErrEpochChanged once
// a Put found the epoch raised. The store then writes nothing more.
func (s *Store) Err() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Close makes later calls fail with lease.ErrClosed and closes the client
// if Open created it. Calls in flight finish (or fail) on their own.
func (s *Store) Close() error {
	if s.closed.Swap(true) || !s.owned {
		return nil
	}
	if err := s.cli.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// keys names the store's etcd keys.
type keys struct{ prefix string }

func (k keys) epoch() string             { return k.prefix + "epoch" }
func (k keys) domain(name string) string { return k.prefix + "domains/" + name }

// encode stores rec without its Version (the key's ModRevision is).
func encode(rec lease.Record) (string, error) {
	rec.Version = 0
	b, err := json.Marshal(rec)
	return string(b), err
}

func decode(domain string, v []byte, modRev int64) (lease.Record, error) {
	var rec lease.Record
	if err := json.Unmarshal(v, &rec); err != nil {
		return lease.Record{}, fmt.Errorf("load %s: %w: %v", domain, lease.ErrCorrupt, err)
	}
	rec.Version = uint64(modRev)
	return rec, nil
}

func parseEpoch(v string) (uint64, error) {
	e, err := strconv.ParseUint(v, 10, 64)
	if err != nil || e == 0 {
		return 0, fmt.Errorf("%w: %q", ErrCorruptEpoch, v)
	}
	return e, nil
}

// Prefix returns the key prefix the store works under.
func (s *Store) Prefix() string { return s.keys.prefix }
