// Package protocol is fencegate's protocol v1 (docs/protocol.md, DESIGN §5)
// and nothing else: the JSON messages between supervisors, agents and the
// lease controller (Command, Result, DeviceState, AgentStatus, Grant, the
// lease Request and Response), the topic names under one prefix (Topics),
// one Code type for agent and lease results, the protocol's limits, the
// reply-topic rule every server applies to a sender's reply_to (ReplyRule),
// and the salvage of a field from a payload that failed strict decoding.
//
// It holds types and pure functions only: no connections, no goroutines, no
// I/O. It imports fence (the token's wire form and the Fence a result
// carries) and nothing else of fencegate; transport/mqtt speaks MQTT without
// knowing these types, and the agent, the controller and the supervisor SDK
// all import this package for the wire.
//
// The wire is frozen: JSON field names, omitempty and topic strings are
// pinned by golden tests, and a rename of a Go identifier here must not
// change them.
package protocol
