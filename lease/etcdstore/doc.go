// Package etcdstore is the lease controller's replicated Store: the epoch
// and one record per fencing domain in an etcd cluster, for several
// controller replicas serving at once (docs/controller.md, "etcd").
//
// Layout (keys under Prefix, default "fencegate/"):
//
//	{prefix}epoch            decimal uint64, set once on first Open and raised only by BumpEpoch
//	{prefix}domains/{domain} JSON lease.Record; its Version is the key's etcd ModRevision
//
// Put is one etcd transaction: If(ModRevision(record) = Version AND
// Value(epoch) = the epoch read at Open) Then Put(record). The first
// compare is the compare-and-put of lease.Store, so two replicas never both
// advance a domain from the same record (no read-then-write race); the
// second makes a replica that still mints tokens of an old epoch (a bump
// after a restore happened while it ran) unable to write: its Puts fail
// with ErrEpochChanged and Err reports it, so the process exits and is
// restarted on the new epoch. A successful Put has been committed by a
// quorum before it returns, so the new high-water mark is durable before
// the controller hands out the token (I1).
//
// Expiry is not kept in etcd (no etcd leases, no stored deadlines): the
// store is lease.Shared, so every replica re-reads a record before acting
// on it and counts a lease from the moment it first read that record
// version, on its own monotonic clock. The write happened before that read,
// so a replica's count never ends before the holder's (which starts at its
// request); renewals are stored, so every replica restarts its count. This
// needs no synchronized wall clocks, only clocks whose rates agree (drift
// well below the TTL), and keeps the millisecond TTLs that etcd leases
// (whole seconds, extended on every etcd leader change) cannot express.
package etcdstore
