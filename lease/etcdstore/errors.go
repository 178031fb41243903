package etcdstore

import "errors"

// Errors of the etcdstore package; test with errors.Is. A Put that loses
// its compare-and-put race fails with lease.ErrConflict.
var (
	// ErrEpochChanged: the epoch in etcd is not the one this store read at
	// Open (an epoch bump after a restore). The store writes nothing more;
	// reopen it (restart the controller).
	ErrEpochChanged = errors.New("etcdstore: epoch changed since the store was opened")
	// ErrNoEpoch: the prefix holds no epoch, so it is no lease store
	// (BumpEpoch refuses to create one).
	ErrNoEpoch = errors.New("etcdstore: no lease store at prefix (no epoch key)")
	// ErrCorruptEpoch: the epoch key does not hold a decimal uint64 > 0.
	ErrCorruptEpoch = errors.New("etcdstore: corrupt epoch")
	// ErrRestored: the cluster was restored from a snapshot (its cluster
	// id changed, or its revision went back) and the epoch was not bumped
	// since: granting would reissue seqs of the lost timeline. The store
	// grants nothing until `controller epoch-bump` has run; then reopen it.
	ErrRestored = errors.New("etcdstore: cluster restored without an epoch bump; run `controller epoch-bump` before granting")
	// ErrConfig: a Config cannot work; the message names the key.
	ErrConfig = errors.New("etcdstore: invalid config")
)
