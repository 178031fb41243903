// Package benchload drives the workloads that measure persist's group
// commit, for the persist benchmarks and cmd/fencebench alike.
//
// Speed is measured, never asserted: every figure comes with a baseline
// measured in the same run on the same disk. The workloads are
//
//   - AcceptLoad: the agent's own path, one durable Store.Accept per
//     operation, with a fresh command id each time and a token that advances
//     (or stays, for the steady variant);
//   - BoltLoad: the same shape of write without group commit, one plain
//     bbolt transaction per operation (DB.Update) or bbolt's DB.Batch;
//   - RawFsync: the disk's raw rate of durable writes, write 4 KiB at offset
//     0 plus fdatasync in a loop, in the same directory.
//
// Run calls an operation from one goroutine per device, for a number of
// operations (benchmarks: b.N) or a duration (the bench command), and
// records every operation's latency.
package benchload
