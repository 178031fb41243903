// Package sim is a simulated token-aware device controller, for tests and
// the quickstart. It registers itself as driver "sim" with package devices.
//
// A Device has configurable ops (default: set, get, pulse), per-op latency
// and failure injection, its own highest-token check per fencing domain (a
// second fence, optionally persisted in a fence file so it survives
// restarts), and an append-only apply log: one JSON line per applied
// command, written before Apply returns. Tests read the log with ReadLog and
// check it with CheckLog: no token goes backwards on a device, and no
// non-idempotent command id is applied twice.
//
// A command that fails changes nothing: neither the device's state, nor its
// fence, nor its log.
package sim
