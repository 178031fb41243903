package protocol

import "testing"

func TestReplyRuleCheck(t *testing.T) {
	rule := ReplyRule{Deny: []string{"cmnd/+/POWER", "relays/#"}}
	tests := []struct {
		name, topic string
		ok          bool
	}{
		{"reply namespace", "fencegate/v1/replies/sup-a", true},
		{"deeper in the namespace", "fencegate/v1/replies/sup-a/x/y", true},
		{"namespace itself", "fencegate/v1/replies/", false},
		{"empty", "", false},
		{"wildcard", "fencegate/v1/replies/+", false},
		{"dollar", "$SYS/broker", false},
		{"outside", "cmnd/plug1/Backlog", false},
		{"agent status", "fencegate/v1/agents/a1/status", false},
		{"device commands", "fencegate/v1/devices/pump1/commands", false},
		{"grant", "fencegate/v1/leases/plant/grant", false},
		// A broker disconnects a client publishing such a topic (found by an
		// attack: the agent was cut off from Mosquitto, over and over).
		{"control character", "fencegate/v1/replies/watcher/\x01", false},
		{"C1 control character", "fencegate/v1/replies/watcher/\u0085", false},
		{"not UTF-8", "fencegate/v1/replies/watcher/\xff", false},
		{"non-ASCII UTF-8", "fencegate/v1/replies/wächter", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := rule.Check(tc.topic)
			if (err == nil) != tc.ok {
				t.Fatalf("Check(%q) = %v, want ok=%v", tc.topic, err, tc.ok)
			}
		})
	}
}

func TestReplyRuleDenyAndPrefixes(t *testing.T) {
	rule := ReplyRule{Prefixes: []string{"site/replies/", "fencegate/v1/"}, Deny: []string{"site/replies/relay/#"}}
	if err := rule.Check("site/replies/sup"); err != nil {
		t.Fatalf("configured prefix refused: %v", err)
	}
	if err := rule.Check("site/replies/relay/cmnd"); err == nil {
		t.Fatal("a denied driver topic was allowed")
	}
	if err := rule.Check("fencegate/v1/devices/p/commands"); err == nil {
		t.Fatal("an own protocol topic was allowed through a broad prefix")
	}
}

func TestMatchFilter(t *testing.T) {
	tests := []struct {
		f, topic string
		want     bool
	}{
		{"a/b", "a/b", true}, {"a/+", "a/b", true}, {"a/+", "a/b/c", false},
		{"a/#", "a/b/c", true}, {"#", "x", true}, {"a/b", "a/c", false}, {"a/b/c", "a/b", false},
	}
	for _, tc := range tests {
		if got := MatchFilter(tc.f, tc.topic); got != tc.want {
			t.Errorf("MatchFilter(%q, %q) = %v, want %v", tc.f, tc.topic, got, tc.want)
		}
	}
}
