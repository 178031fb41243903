package protocol

import (
	"encoding/json"

	"github.com/fencegate/fencegate/fence"
)

// Command is a supervisor's command for one device (protocol v1).
type Command struct {
	// ID identifies the command; a retry reuses it. 1..128 bytes.
	ID string `json:"id"`
	// Token is the wire form of the sender's fencing token.
	Token string `json:"token"`
	// Op names the device operation.
	Op string `json:"op"`
	// Args are the op's arguments: a JSON object, or absent.
	Args json.RawMessage `json:"args,omitempty"`
	// ReplyTo is the topic for the result; default the device's results topic.
	ReplyTo string `json:"reply_to,omitempty"`
	// DeadlineMs is an optional Unix time in milliseconds after which the
	// command must not be applied.
	DeadlineMs int64 `json:"deadline_ms,omitempty"`
}

// Status is a result's outcome.
type Status string

// Result statuses.
const (
	StatusApplied  Status = "applied"
	StatusRejected Status = "rejected"
	StatusFailed   Status = "failed"
	StatusInDoubt  Status = "in_doubt"
)

// Result answers one command (protocol v1).
type Result struct {
	ID        string          `json:"id"`
	Device    string          `json:"device"`
	Status    Status          `json:"status"`
	Code      Code            `json:"code"`
	Message   string          `json:"message,omitempty"`
	Duplicate bool            `json:"duplicate"`
	Fence     *fence.Fence    `json:"fence,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	At        string          `json:"at"` // RFC 3339
}

// DeviceState is a device's retained state message.
type DeviceState struct {
	Device    string       `json:"device"`
	Domain    string       `json:"domain,omitempty"` // the device's fencing domain; Fence is that domain's fence
	Agent     string       `json:"agent"`
	Online    bool         `json:"online"`
	Fence     *fence.Fence `json:"fence,omitempty"`
	UpdatedAt string       `json:"updated_at"` // RFC 3339
}

// AgentStatus is an agent's retained status message (also its Will, with
// Online false).
type AgentStatus struct {
	Online  bool   `json:"online"`
	Boot    string `json:"boot,omitempty"` // RFC 3339 start time of this run
	Version string `json:"version,omitempty"`
	At      string `json:"at"` // RFC 3339
}

// Grant is the retained announcement of a domain's newest lease.
type Grant struct {
	Token string `json:"token"`
}
