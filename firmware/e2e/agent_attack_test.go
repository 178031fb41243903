package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/fencegate/fencegate/protocol"
)

// TestAttackAgentReplyToControlCharacter: found while attacking the
// device's reply_to (TestAttackReplyToThatIsNotATopic), in the agent. A
// command whose reply_to is under the reply namespace but holds a control
// character (JSON "\u0001": valid UTF-8, no wildcard, no NUL, so
// protocol.ReplyRule.Check passes it) makes the agent publish its result to
// a topic MQTT forbids. Mosquitto answers by disconnecting the agent
// ("disconnected due to malformed packet"); the agent reconnects and
// publishes the same result again, and is disconnected again, for as long
// as it runs: one command from any client allowed to send commands cuts
// every device of the agent off the broker (I6: bad input must be answered,
// bad_request, not obeyed). The command after it is never answered.
func TestAttackAgentReplyToControlCharacter(t *testing.T) {
	e := newEnv(t)
	e.startDevice(t, base)
	e.startAgent(t)
	tok := rawAcquire(t, e.dial(t, "sup-a"), domain, time.Minute)
	args := func(state string) json.RawMessage {
		b, _ := json.Marshal(relayArgs(state, tok.Raw))
		return b
	}
	e.watcher.PublishRaw(t, device, []byte(`{"id":"poison","token":"`+tok.Raw+`","op":"power","args":`+string(args("ON"))+
		`,"reply_to":"`+e.watcher.ReplyTo()+`/\u0001"}`))
	r := e.watcher.Send(t, device, protocol.Command{ID: "after", Token: tok.Raw, Op: "power", Args: args("OFF")})
	if r.Status != protocol.StatusApplied {
		t.Fatalf("the command after the poisoned reply_to: %+v", r)
	}
	if r := e.watcher.Wait(t, "poison"); r.Code != protocol.CodeBadRequest {
		t.Errorf("the command with a control character in reply_to: %+v, want bad_request on the results topic", r)
	}
}
