// Package server is fencegate's lease controller as a library, shaped like
// the agent: Config (the controller's YAML file, which cmd/controller's
// flags override) with Validate; New, which opens the key, the lease store
// (bbolt or etcd), the embedded broker and the listeners, so that errors
// show at start and addresses are known before Run; and Run, which serves
// the MQTT and HTTP APIs until its context ends or the store fails, then
// shuts down in order. cmd/controller parses flags into a Config and calls
// it; internal/stack runs it beside an agent in one process.
//
// It lives under lease/ rather than at the top level because DESIGN §8
// puts the controller library in layer 3 with lease and its stores, and
// because the rule that the supervisor SDK imports nothing under lease/
// then covers it too. It uses the etcd client only: no etcd server enters
// a binary built with it (the embedded etcd of the tests lives in the
// etcdtest module).
package server
