package protocol

import "encoding/json"

// MaxSalvageBytes bounds the payload Salvage searches; from a larger one it
// salvages nothing.
const MaxSalvageBytes = 1 << 20

// Salvage returns the string field key (a command's "id", a lease
// request's "request_id", "reply_to") of a payload that failed strict
// decoding, so that the rejection can still be answered. It returns "" when
// the payload is over MaxSalvageBytes or not a JSON object, or the field is
// missing, not a string, or over maxLen bytes. Only rejection paths use it:
// a well-formed message is decoded once, strictly.
func Salvage(payload []byte, key string, maxLen int) string {
	var m map[string]json.RawMessage
	if len(payload) > MaxSalvageBytes || json.Unmarshal(payload, &m) != nil {
		return ""
	}
	var s string
	if raw, ok := m[key]; !ok || json.Unmarshal(raw, &s) != nil || len(s) > maxLen {
		return ""
	}
	return s
}
