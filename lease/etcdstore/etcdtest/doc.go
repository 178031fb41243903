// Package etcdtest runs the lease controller on real etcd clusters
// started in-process (go.etcd.io/etcd/server/v3/embed) on loopback ports:
// the shared Store suite, replica failover, restore with an epoch bump and
// benchmarks. It is its own module so that the etcd server and its
// dependencies stay out of fencegate's module graph and binaries; run it
// with `cd lease/etcdstore/etcdtest && go test -race ./...`.
package etcdtest
