// Package etcdstore is the lease controller's replicated Store: the epoch
// and one record per fencing domain in an etcd cluster, for several
// controller replicas serving at once (docs/controller.md, "etcd").
//
// Layout (keys under Prefix, default "fencegate/"):
//
//	{prefix}epoch            decimal uint64, set once on first Open and raised only by BumpEpoch
//	{prefix}domains/{domain} JSON lease.Record; its Version is the key's etcd ModRevision
//	{prefix}cluster          "{epoch} {cluster id, hex}": the cluster the epoch was first used on,
//	                         or "{epoch} restored" once a replica saw the revision go back
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
// A restore from a snapshot without the epoch bump would make the store
// reissue the seqs granted after the snapshot under the same epoch (agents
// then reject every new grant as a forgery). The store refuses to grant
// instead, with ErrRestored naming `controller epoch-bump`, when it sees
// the restore: Open fails if the cluster marker binds the current epoch to
// another cluster id (a restore with a new cluster token, as etcdutl does
// by default) or is marked restored; a running Store checks every response
// (cluster id unchanged, revision not below the highest one seen before the
// request was sent), and on a mismatch fails for good (Err) and marks the
// epoch restored, so that stores opened later refuse too. A bump changes
// the epoch, so the next Open binds the new epoch to the cluster. A
// restore that keeps the cluster id, with no replica running across it,
// cannot be seen from etcd alone: the bump stays part of every restore.
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
