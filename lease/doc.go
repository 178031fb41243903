// Package lease is fencegate's lease controller: it serializes acquisitions
// per fencing domain and hands each new owner a signed fencing token
// strictly greater than every earlier one of that domain (invariant I1),
// made durable in a Store before the token leaves the controller.
//
// Operations (DESIGN §4, docs/controller.md):
//
//   - acquire: a free domain (never held, released or expired) gets a new
//     lease; a domain held by another holder answers CodeHeld with the holder
//     and the remaining time, or, with a wait, waits for it to free up; the
//     same holder under a new request id gets a new lease superseding its
//     old one; a retry with a known request id gets the same grant again.
//   - renew: extends the lease its token names, returning the same token
//     (a token is never re-minted at the same (epoch, seq)).
//   - release and get.
//
// Waiting acquires are served first come, first served per domain. Reads of
// unknown domains create nothing; idle domains (no live lease, no waiter)
// leave memory and are read back from the store; Config.Domains limits the
// names served and Config.MaxDomains the domains in memory (CodeBusy
// beyond). A grant is refused (ErrEpochBehind) when its token would not
// sort above a position Config.EpochFloor reports, and a new store refuses
// a clock before the build date (BuildFloor, ErrClockBehind).
//
// Expiry runs on the controller's monotonic clock. A lease found in the
// store when the controller starts (or first reads the domain) is honoured
// for its full TTL counted from the start: wall clocks are not trusted.
//
// The Controller is transport-neutral; lease/mqttapi and lease/httpapi
// serve it over MQTT and HTTP, lease/boltstore stores it in bbolt and
// lease/etcdstore in etcd for several replicas (see Shared).
package lease
