package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
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
	cluster uint64 // the etcd cluster id seen at Open

	rev    atomic.Int64          // the highest etcd revision any response carried
	failed atomic.Pointer[error] // ErrEpochChanged or ErrRestored once found
	closed atomic.Bool
}

var (
	_ lease.Shared  = (*Store)(nil)
	_ lease.Scanner = (*Store)(nil)
)

// Open connects to the cluster of cfg and opens the store under its
// prefix, creating the epoch (now in Unix ms) if the prefix has none. The
// Store owns the client. ctx bounds the opening. A cluster restored from a
// snapshot without an epoch bump since fails Open with ErrRestored (see
// the package doc).
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
// closes after the Store. It reads the epoch, creating it if absent, and
// checks the cluster marker as Open does.
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

// openTries bounds Open's attempts to bind the cluster marker when other
// replicas open (or a bump runs) at the same moment.
const openTries = 5

// initEpoch reads the epoch, or creates it as created's Unix ms if no
// replica did first, and checks (or sets) the cluster marker; see
// checkMarker.
func (s *Store) initEpoch(ctx context.Context, created time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	fresh := strconv.FormatUint(uint64(max(created.UnixMilli(), 1)), 10)
	for range openTries {
		marker, err := s.readEpoch(ctx, fresh)
		if err != nil {
			return err
		}
		if done, err := s.checkMarker(ctx, marker); done || err != nil {
			return err
		}
	}
	return fmt.Errorf("open: cluster marker: %w", lease.ErrConflict)
}

// readEpoch reads (or creates) the epoch and reads the cluster marker in
// one transaction; it sets epochV, epoch and cluster and returns the
// marker (nil if absent).
func (s *Store) readEpoch(ctx context.Context, fresh string) (*mvccpb.KeyValue, error) {
	k, m := s.keys.epoch(), s.keys.cluster()
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, fresh), clientv3.OpGet(m)).Else(clientv3.OpGet(k), clientv3.OpGet(m)).Commit()
	if err != nil {
		return nil, fmt.Errorf("open: epoch: %w", err)
	}
	s.cluster = resp.Header.ClusterId
	s.rev.Store(resp.Header.Revision)
	s.epochV = fresh
	if !resp.Succeeded {
		s.epochV = string(resp.Responses[0].GetResponseRange().Kvs[0].Value)
	}
	if s.epoch, err = parseEpoch(s.epochV); err != nil {
		return nil, err
	}
	return firstKV(resp.Responses[1].GetResponseRange()), nil
}

func firstKV(r *etcdserverpb.RangeResponse) *mvccpb.KeyValue {
	if len(r.GetKvs()) == 0 {
		return nil
	}
	return r.Kvs[0]
}

// checkMarker compares the cluster marker with the epoch and cluster just
// read. A marker of this epoch must name this cluster: one naming another
// cluster, or one a replica marked restored, means the cluster was
// restored without a bump (ErrRestored). A marker of an older epoch (a bump
// since) or none is replaced by one binding the epoch to this cluster;
// done is false if another writer came first (read again).
func (s *Store) checkMarker(ctx context.Context, marker *mvccpb.KeyValue) (done bool, err error) {
	bound := s.epochV + " " + strconv.FormatUint(s.cluster, 16)
	var modRev int64
	if marker != nil {
		epochV, cluster, _ := strings.Cut(string(marker.Value), " ")
		switch {
		case string(marker.Value) == bound:
			return true, nil
		case epochV == s.epochV && cluster == markRestored:
			return false, fmt.Errorf("open: %w: a replica saw the revision go back at epoch %s", ErrRestored, s.epochV)
		case epochV == s.epochV:
			return false, fmt.Errorf("open: %w: epoch %s was bound to cluster id %s, this cluster is %x", ErrRestored, s.epochV, cluster, s.cluster)
		}
		modRev = marker.ModRevision
	}
	floor := s.rev.Load()
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(s.keys.epoch()), "=", s.epochV),
		clientv3.Compare(clientv3.ModRevision(s.keys.cluster()), "=", modRev)).
		Then(clientv3.OpPut(s.keys.cluster(), bound)).Commit()
	if err != nil {
		return false, fmt.Errorf("open: cluster marker: %w", err)
	}
	return resp.Succeeded, s.observe(ctx, resp.Header.ClusterId, resp.Header.Revision, floor)
}

// markRestored replaces the cluster id in a marker that a replica found
// restored (the revision went back under the same cluster id).
const markRestored = "restored"

// observe checks the header of a response to a request sent when the
// highest revision seen was floor: the same cluster, and a revision not
// below floor (every etcd request of the store is linearizable, so a
// response never shows less than one received before the request was
// sent). Otherwise the cluster was restored under the running store: it
// fails for good with ErrRestored and marks the store in etcd so that
// stores opened later refuse too.
func (s *Store) observe(ctx context.Context, cluster uint64, rev, floor int64) error {
	switch {
	case cluster != s.cluster:
		return s.restored(ctx, fmt.Sprintf("the cluster id changed from %x to %x", s.cluster, cluster))
	case rev < floor:
		return s.restored(ctx, fmt.Sprintf("the revision went back from %d to %d", floor, rev))
	}
	for cur := s.rev.Load(); rev > cur && !s.rev.CompareAndSwap(cur, rev); cur = s.rev.Load() {
	}
	return nil
}

// restored ends the store with ErrRestored and marks the epoch restored in
// etcd (unless it was bumped meanwhile), with a fresh bounded context: the
// mark outlives ctx's cancellation.
func (s *Store) restored(ctx context.Context, why string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	_, merr := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(s.keys.epoch()), "=", s.epochV)).
		Then(clientv3.OpPut(s.keys.cluster(), s.epochV+" "+markRestored)).Commit()
	err := fmt.Errorf("%w: %s since the store was opened at epoch %s", ErrRestored, why, s.epochV)
	if merr != nil {
		err = fmt.Errorf("%w (marking the store restored in etcd failed: %w)", err, merr)
	}
	s.failed.CompareAndSwap(nil, &err)
	return *s.failed.Load()
}

// Epoch returns the epoch read (or created) at Open.
func (s *Store) Epoch(context.Context) (uint64, error) { return s.epoch, nil }

// Shared reports true: several controllers use one etcd store at once.
func (s *Store) Shared() bool { return true }

// Load reads domain's record linearizably (through the etcd leader). A
// response showing the cluster restored under the store fails it with
// ErrRestored (and ends the store, see Err).
func (s *Store) Load(ctx context.Context, domain string) (lease.Record, error) {
	if s.closed.Load() {
		return lease.Record{}, fmt.Errorf("load %s: %w", domain, lease.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	floor := s.rev.Load()
	resp, err := s.cli.Get(ctx, s.keys.domain(domain))
	if err != nil {
		return lease.Record{}, fmt.Errorf("load %s: %w", domain, err)
	}
	if err := s.observe(ctx, resp.Header.ClusterId, resp.Header.Revision, floor); err != nil {
		return lease.Record{}, fmt.Errorf("load %s: %w", domain, err)
	}
	if len(resp.Kvs) == 0 {
		return lease.Record{}, nil
	}
	return decode(domain, resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
}

// scanPage is how many records one Scan request reads.
const scanPage = 500

// Scan lists every domain's record, a page of scanPage keys per request,
// for the re-announcement of live leases at start (lease.Scanner). Each
// page is read linearizably; the pages are not one snapshot, which
// re-announcement does not need (a record changed meanwhile is announced
// by its own grant).
func (s *Store) Scan(ctx context.Context, fn func(domain string, rec lease.Record) bool) error {
	prefix := s.keys.domain("")
	from, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	for {
		kvs, more, err := s.scanPage(ctx, from, end)
		if err != nil {
			return fmt.Errorf("scan: %w", err)
		}
		for _, kv := range kvs {
			rec, err := decode(string(kv.Key), kv.Value, kv.ModRevision)
			if err != nil {
				return fmt.Errorf("scan: %w", err)
			}
			if !fn(strings.TrimPrefix(string(kv.Key), prefix), rec) {
				return nil
			}
		}
		if !more || len(kvs) == 0 {
			return nil
		}
		from = string(kvs[len(kvs)-1].Key) + "\x00"
	}
}

func (s *Store) scanPage(ctx context.Context, from, end string) ([]*mvccpb.KeyValue, bool, error) {
	if s.closed.Load() {
		return nil, false, lease.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	floor := s.rev.Load()
	resp, err := s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(scanPage))
	if err != nil {
		return nil, false, err
	}
	if err := s.observe(ctx, resp.Header.ClusterId, resp.Header.Revision, floor); err != nil {
		return nil, false, err
	}
	return resp.Kvs, resp.More, nil
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
	floor := s.rev.Load()
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(k), "=", int64(rec.Version)),
		clientv3.Compare(clientv3.Value(s.keys.epoch()), "=", s.epochV),
	).Then(clientv3.OpPut(k, val)).Else(clientv3.OpGet(s.keys.epoch())).Commit()
	if err != nil {
		return lease.Record{}, fmt.Errorf("put %s: %w", domain, err)
	}
	if err := s.observe(ctx, resp.Header.ClusterId, resp.Header.Revision, floor); err != nil {
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
// a Put found the epoch raised, ErrRestored once a response showed the
// cluster restored under the store. The store then writes nothing more.
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
func (k keys) cluster() string           { return k.prefix + "cluster" }
func (k keys) domain(name string) string { return k.prefix + "domains/" + name }

// encode stores rec without its Version (the key's ModRevision is).
func encode(rec lease.Record) (string, error) {
	rec.Version = 0
	return string(rec.AppendJSON(nil)), nil
}

func decode(domain string, v []byte, modRev int64) (lease.Record, error) {
	var rec lease.Record
	if err := json.Unmarshal(v, &rec); err != nil {
		return lease.Record{}, fmt.Errorf("load %s: %w: %w", domain, lease.ErrCorrupt, err)
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
