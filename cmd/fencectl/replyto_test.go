package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/mqtttest"
	"github.com/fencegate/fencegate/protocol"
)

// TestReplyTopicInReplyNamespace: fencectl's lease requests and commands
// name a reply_to in the reply namespace, which the agent's and the
// controller's reply rule accept.
func TestReplyTopicInReplyNamespace(t *testing.T) {
	s := startStack(t)
	w := mqtttest.NewSupervisor(t, s.URL(), mqtttest.Options{ClientID: "reply-watch"})
	watched := map[string]<-chan []byte{
		"acquire": w.Watch(t, protocol.Topics{}.Lease("plant", "acquire")),
		"command": w.Watch(t, protocol.Topics{}.DeviceCommands("pump1")),
	}
	if out, errs, code := fencectl(t, "send", "pump1", "set", `{"value":1}`, "--broker="+s.URL(), "--domain", "plant"); code != exitOK {
		t.Fatalf("send --domain: exit %d %q %q", code, out, errs)
	}
	for name, ch := range watched {
		var m struct {
			ReplyTo string `json:"reply_to"`
		}
		select {
		case p := <-ch:
			if err := json.Unmarshal(p, &m); err != nil {
				t.Fatalf("%s payload %q: %v", name, p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s seen", name)
		}
		if !strings.HasPrefix(m.ReplyTo, protocol.Topics{}.Replies()) {
			t.Errorf("%s reply_to %q is not under %s", name, m.ReplyTo, protocol.Topics{}.Replies())
		}
		if err := (protocol.ReplyRule{}).Check(m.ReplyTo); err != nil {
			t.Errorf("%s reply_to refused by the default reply rule: %v", name, err)
		}
	}
}
