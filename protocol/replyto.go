package protocol

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxReplyTopicBytes is the longest reply_to topic accepted.
const MaxReplyTopicBytes = 1024

// Replies is the reply namespace of protocol v1: every reply_to must lie
// under it (or under another prefix an operator configured). A client
// replies under Replies()+"<client id>/...".
func (t Topics) Replies() string { return t.prefix() + "/replies/" }

// ReplyTopic is the reply topic of one client in the reply namespace.
func (t Topics) ReplyTopic(client string) string { return t.Replies() + client }

// ReplyRule decides where a server (the agent, the controller) may publish
// a reply named by a sender's reply_to, so that reply_to cannot make it a
// confused deputy: it never publishes to $ topics, to protocol topics of
// its own prefix (commands, results, state, status, leases, grants), to a
// topic a driver writes, or outside the allowed prefixes.
//
// The zero value allows only Topics{}.Replies(). A ReplyRule is read-only
// once built and safe for concurrent use.
type ReplyRule struct {
	Topics Topics
	// Prefixes are the allowed topic prefixes; empty means
	// []string{Topics.Replies()}.
	Prefixes []string
	// Deny are MQTT topic filters a reply may never match (e.g. the topics
	// drivers publish to), checked on top of the built-in denials.
	Deny []string
}

// Check returns nil if a reply may be published to topic, else an error
// naming the rule the topic breaks.
func (r ReplyRule) Check(topic string) error {
	switch {
	case topic == "" || len(topic) > MaxReplyTopicBytes:
		return fmt.Errorf("reply_to: must be 1..%d bytes", MaxReplyTopicBytes)
	case strings.ContainsAny(topic, "+#\x00"):
		return fmt.Errorf("reply_to: %.64q must not contain wildcards or NUL", topic)
	case !utf8.ValidString(topic) || strings.ContainsFunc(topic, unicode.IsControl):
		// A broker drops the connection of a client that publishes such a
		// topic (MQTT: well-formed UTF-8, no control characters), and the
		// reply would be resent on every reconnection.
		return fmt.Errorf("reply_to: %.64q must be valid UTF-8 without control characters", topic)
	case strings.HasPrefix(topic, "$"):
		return fmt.Errorf("reply_to: %.64q is a $ topic", topic)
	}
	if !r.allowed(topic) {
		return fmt.Errorf("reply_to: %.64q is not under an allowed reply prefix (%s)", topic, strings.Join(r.prefixes(), ", "))
	}
	for _, own := range []string{"/devices/", "/agents/", "/leases/"} {
		if strings.HasPrefix(topic, r.Topics.prefix()+own) {
			return fmt.Errorf("reply_to: %.64q is a protocol topic (%s…)", topic, r.Topics.prefix()+own)
		}
	}
	for _, f := range r.Deny {
		if MatchFilter(f, topic) {
			return fmt.Errorf("reply_to: %.64q is a topic a driver of this server writes (%s)", topic, f)
		}
	}
	return nil
}

func (r ReplyRule) prefixes() []string {
	if len(r.Prefixes) == 0 {
		return []string{r.Topics.Replies()}
	}
	return r.Prefixes
}

func (r ReplyRule) allowed(topic string) bool {
	for _, p := range r.prefixes() {
		if strings.HasPrefix(topic, p) && len(topic) > len(p) {
			return true
		}
	}
	return false
}

// MatchFilter reports whether topic matches the MQTT topic filter f
// (with + and # wildcards, MQTT 3.1.1 section 4.7).
func MatchFilter(f, topic string) bool {
	fs, ts := strings.Split(f, "/"), strings.Split(topic, "/")
	for i, level := range fs {
		switch {
		case level == "#":
			return true
		case i >= len(ts):
			return false
		case level != "+" && level != ts[i]:
			return false
		}
	}
	return len(fs) == len(ts)
}
