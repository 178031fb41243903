package etcdstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/lease"
)

// BumpEpoch raises the epoch under prefix (default "fencegate/") to
// max(now in Unix ms, old+1) and returns both. Run it after restoring the
// cluster from a snapshot and before any controller starts on it: every
// token minted afterwards is greater than every token of the lost
// timeline, whatever its seq. A controller still running on the old epoch
// can write nothing more (its Puts fail with ErrEpochChanged). A prefix
// without an epoch fails with ErrNoEpoch; a concurrent bump makes this one
// fail with lease.ErrConflict.
func BumpEpoch(ctx context.Context, cli *clientv3.Client, prefix string, now time.Time) (old, bumped uint64, err error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	k := keys{prefix}.epoch()
	resp, err := cli.Get(ctx, k)
	if err != nil {
		return 0, 0, fmt.Errorf("bump epoch: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, 0, fmt.Errorf("bump epoch: %w: %q", ErrNoEpoch, prefix)
	}
	if old, err = parseEpoch(string(resp.Kvs[0].Value)); err != nil {
		return 0, 0, fmt.Errorf("bump epoch: %w", err)
	}
	bumped = max(uint64(max(now.UnixMilli(), 0)), old+1)
	txn, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", resp.Kvs[0].ModRevision)).
		Then(clientv3.OpPut(k, strconv.FormatUint(bumped, 10))).Commit()
	switch {
	case err != nil:
		return 0, 0, fmt.Errorf("bump epoch: %w", err)
	case !txn.Succeeded:
		return 0, 0, fmt.Errorf("bump epoch: %w", lease.ErrConflict)
	}
	return old, bumped, nil
}

// BumpEpochAt is BumpEpoch on a client it opens from cfg and closes.
func BumpEpochAt(ctx context.Context, cfg Config, now time.Time) (old, bumped uint64, err error) {
	if err := cfg.Validate("etcd"); err != nil {
		return 0, 0, err
	}
	cfg = cfg.withDefaults()
	cc, err := cfg.clientConfig()
	if err != nil {
		return 0, 0, err
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return 0, 0, fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	return BumpEpoch(ctx, cli, cfg.Prefix, now)
}
