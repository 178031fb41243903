package protocol

import (
	"strings"
	"testing"
)

// TestSalvage: one function salvages a string field from a payload that
// failed strict decoding, and nothing from what is not a JSON object, not a
// string, too long, or too big to search.
func TestSalvage(t *testing.T) {
	big := `{"id":"x","pad":"` + strings.Repeat("p", MaxSalvageBytes) + `"}`
	tests := []struct {
		name, payload, key string
		maxLen             int
		want               string
	}{
		{"id of a command with an unknown field", `{"id":"c1","token":"t","op":"set","extra":1}`, "id", MaxCommandIDLen, "c1"},
		{"reply_to", `{"id":"c1","reply_to":"fencegate/v1/replies/s"}`, "reply_to", MaxReplyTopicBytes, "fencegate/v1/replies/s"},
		{"request_id of a lease request of wrong types", `{"request_id":"r1","ttl_ms":"long"}`, "request_id", MaxSalvageBytes, "r1"},
		{"missing", `{"op":"set"}`, "id", MaxCommandIDLen, ""},
		{"not a string", `{"id":7}`, "id", MaxCommandIDLen, ""},
		{"null", `{"id":null}`, "id", MaxCommandIDLen, ""},
		{"over maxLen", `{"id":"` + strings.Repeat("i", MaxCommandIDLen+1) + `"}`, "id", MaxCommandIDLen, ""},
		{"at maxLen", `{"id":"` + strings.Repeat("i", MaxCommandIDLen) + `"}`, "id", MaxCommandIDLen, strings.Repeat("i", MaxCommandIDLen)},
		{"not JSON", `id=c1`, "id", MaxCommandIDLen, ""},
		{"not an object", `["c1"]`, "id", MaxCommandIDLen, ""},
		{"over MaxSalvageBytes", big, "id", MaxCommandIDLen, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Salvage([]byte(tc.payload), tc.key, tc.maxLen); got != tc.want {
				t.Fatalf("Salvage(%.40q, %q) = %.40q, want %.40q", tc.payload, tc.key, got, tc.want)
			}
		})
	}
}
