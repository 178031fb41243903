package supervisor_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/mqtttest"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
)

// TestReplyTopicInReplyNamespace: the lease requests and the commands the
// SDK sends name a reply_to under the client's topic in the reply
// namespace, which the agent's and the controller's reply rule accept.
func TestReplyTopicInReplyNamespace(t *testing.T) {
	s := startStack(t, 0)
	w := mqtttest.NewSupervisor(t, s.URL(), mqtttest.Options{ClientID: "reply-watch"})
	acquires := w.Watch(t, protocol.Topics{}.Lease("plant", "acquire"))
	commands := w.Watch(t, protocol.Topics{}.DeviceCommands("pump1"))
	a := dial(t, s.URL(), "A")
	l, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Send(ctxT(t, 10*time.Second), "pump1", "set", map[string]int{"value": 1}); err != nil {
		t.Fatal(err)
	}
	want := protocol.Topics{}.ReplyTopic("sup-A")
	for name, ch := range map[string]<-chan []byte{"acquire": acquires, "command": commands} {
		replyTo := firstReplyTo(t, ch)
		if replyTo != want && !strings.HasPrefix(replyTo, want+"/") {
			t.Errorf("%s reply_to %q, want %q or a subtopic", name, replyTo, want)
		}
		if err := (protocol.ReplyRule{}).Check(replyTo); err != nil {
			t.Errorf("%s reply_to refused by the default reply rule: %v", name, err)
		}
	}
}

// firstReplyTo returns the reply_to of the first payload on ch.
func firstReplyTo(t *testing.T, ch <-chan []byte) string {
	t.Helper()
	select {
	case p := <-ch:
		var m struct {
			ReplyTo string `json:"reply_to"`
		}
		if err := json.Unmarshal(p, &m); err != nil {
			t.Fatalf("payload %q: %v", p, err)
		}
		return m.ReplyTo
	case <-time.After(10 * time.Second):
		t.Fatal("no request seen")
		return ""
	}
}
