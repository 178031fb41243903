// Package boltstore is the lease controller's embedded Store: one bbolt
// file, written through internal/groupcommit so that concurrent writes of many
// domains share one fsync.
//
// Layout (bbolt buckets):
//
//	meta     "schema" → "1", "epoch" → big-endian uint64
//	domains  domain → JSON lease.Record
//
// The epoch is set to the creation time in Unix ms when the file is created
// and raised only by BumpEpoch, with the controller stopped.
package boltstore
