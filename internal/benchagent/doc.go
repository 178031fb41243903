// Package benchagent drives the agent end to end for cmd/fencebench: an
// in-process agent with sim devices (no latency) on an embedded broker,
// supervisors that send commands and wait for each result, and, on the
// same broker in the same run, the bare MQTT request/reply baseline (an
// echo responder instead of the agent).
//
// Speed is measured, never asserted: every figure is only comparable with
// the baseline measured beside it.
package benchagent
