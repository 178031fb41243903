package benchagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/internal/benchload"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// echoFilter is where the bare baseline's requests go: a topic tree of its
// own, so that an agent on the same broker never sees them.
const echoFilter = "bench/echo/+/commands"

func echoTopic(s int) string { return "bench/echo/" + strconv.Itoa(s) + "/commands" }

// Echo is the bare MQTT request/reply baseline: a responder publishes each
// request, as is, to its reply_to.
type Echo struct {
	client paho.Client
	runs   int
}

// StartEcho connects the responder to the broker at brokerURL.
func StartEcho(brokerURL string) (*Echo, error) {
	e := &Echo{}
	opts, err := mqtt.Config{Broker: brokerURL, ClientID: "bench-echo"}.ClientOptions(nil)
	if err != nil {
		return nil, err
	}
	e.client = paho.NewClient(opts)
	if err := mqtt.Wait(e.client.Connect(), 10*time.Second); err != nil {
		return nil, fmt.Errorf("echo responder: %w", err)
	}
	if err := mqtt.Wait(e.client.Subscribe(echoFilter, 1, e.echo), 10*time.Second); err != nil {
		e.client.Disconnect(0)
		return nil, fmt.Errorf("echo responder: %w", err)
	}
	return e, nil
}

func (e *Echo) echo(_ paho.Client, m paho.Message) {
	var c struct {
		ReplyTo string `json:"reply_to"`
	}
	if json.Unmarshal(m.Payload(), &c) == nil && c.ReplyTo != "" {
		e.client.Publish(c.ReplyTo, 1, false, m.Payload())
	}
}

// RoundTrips runs l's shape of load (same clients, QoS, payload and
// token size as Agent.Commands) against the responder.
func (e *Echo) RoundTrips(ctx context.Context, l Load) (benchload.Result, error) {
	if l.InFlight < 1 {
		return benchload.Result{}, fmt.Errorf("%w: in flight %d", ErrInvalid, l.InFlight)
	}
	cs, err := clients(l.Broker, min(l.InFlight, 4))
	if err != nil {
		return benchload.Result{}, err
	}
	defer closeAll(cs)
	e.runs++
	run := e.runs
	tok := l.Tokens.At(0, 0).Raw
	op := func(ctx context.Context, s, k int) error {
		cmd := protocol.Command{ID: "e" + strconv.Itoa(run) + "-" + strconv.Itoa(s) + "-" + strconv.Itoa(k), Token: tok,
			Op: "set", Args: json.RawMessage(`{"value":` + strconv.Itoa(k) + `}`)}
		_, err := cs[s%len(cs)].call(ctx, echoTopic(s), cmd)
		return err
	}
	return benchload.Run(ctx, l.InFlight, l.Limit, op)
}

// Close disconnects the responder.
func (e *Echo) Close() { e.client.Disconnect(100) }
