package mqtttest

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// Buffer sizes of the per-id result and per-device state channels.
const (
	resultBuffer = 64
	stateBuffer  = 64
)

// ackTimeout bounds each wait for the broker: connect, subscribe, publish.
const ackTimeout = 10 * time.Second

// Options configures a Supervisor. Zero values mean defaults.
type Options struct {
	// ClientID is the MQTT client id; required, unique on the broker.
	ClientID string
	// Username and Password are the broker credentials; empty for an
	// anonymous broker.
	Username, Password string
	// ReplyTopics are topic filters, beside every device's results topic
	// and this supervisor's own reply topic (ReplyTo), on which results
	// arrive (reply_to topics).
	ReplyTopics []string
	// Timeout bounds each wait for a result or a device state.
	// Default 15 s.
	Timeout time.Duration
}

// Supervisor is a real MQTT client that sends commands and collects
// results (by command id), device states (by device) and agent status.
// Its methods may be called from several goroutines at once.
type Supervisor struct {
	tb      testing.TB // receives errors found in callbacks
	client  paho.Client
	timeout time.Duration
	replyTo string // protocol.Topics{}.ReplyTopic(ClientID)

	mu      sync.Mutex                           // guards results, states and online
	results map[string]chan protocol.Result      // by command id
	states  map[string]chan protocol.DeviceState // by device
	online  map[string][]chan struct{}           // by agent: closed at its next online status
}

// NewSupervisor connects a supervisor to broker and returns once its
// subscriptions (every device's results and state, every agent's status,
// its reply topic ReplyTo and its subtopics, o.ReplyTopics) are in place;
// a reconnection subscribes again. It disconnects in tb's Cleanup; errors found
// in paho callbacks (an undecodable result, a result nobody reads) are
// reported with tb.Errorf. Per-call methods take their own testing.TB so
// that subtests fail themselves.
func NewSupervisor(tb testing.TB, broker string, o Options) *Supervisor {
	tb.Helper()
	s := &Supervisor{tb: tb, timeout: o.Timeout, replyTo: protocol.Topics{}.ReplyTopic(o.ClientID), results: map[string]chan protocol.Result{},
		states: map[string]chan protocol.DeviceState{}, online: map[string][]chan struct{}{}}
	if s.timeout == 0 {
		s.timeout = 15 * time.Second
	}
	cfg := mqtt.Config{Broker: broker, ClientID: o.ClientID, Username: o.Username, Password: o.Password,
		ConnectTimeout: ackTimeout}
	ctx, cancel := context.WithTimeout(context.Background(), 2*ackTimeout)
	defer cancel()
	c, err := mqtt.Dial(ctx, cfg, s.subscriptions(s.replyFilters(o.ReplyTopics)))
	if err != nil {
		tb.Fatal(err)
	}
	s.client = c
	tb.Cleanup(func() { s.client.Disconnect(100) })
	return s
}

// ReplyTo is this supervisor's reply topic in the reply namespace,
// protocol.Topics{}.ReplyTopic(client id), which agents and controllers accept
// as reply_to. Results sent there, or to a subtopic, arrive in Wait.
func (s *Supervisor) ReplyTo() string { return s.replyTo }

// replyFilters is extra plus ReplyTo's filter, unless a filter of extra
// already covers it (paho would hand each result to both handlers).
func (s *Supervisor) replyFilters(extra []string) []string {
	for _, f := range extra {
		if protocol.MatchFilter(f, s.replyTo) && protocol.MatchFilter(f, s.replyTo+"/x") {
			return extra
		}
	}
	return append(append([]string(nil), extra...), s.replyTo+"/#")
}

// subscriptions are the supervisor's filters and their handlers,
// subscribed again on every (re)connection.
func (s *Supervisor) subscriptions(replyTopics []string) map[string]paho.MessageHandler {
	tp := protocol.Topics{}
	subs := map[string]paho.MessageHandler{
		tp.DeviceResults("+"): s.onResult,
		tp.DeviceState("+"):   s.onState,
		tp.AgentStatus("+"):   s.onStatus,
	}
	for _, topic := range replyTopics {
		subs[topic] = s.onResult
	}
	return subs
}

// Client is the underlying paho client, for publishing anything else.
func (s *Supervisor) Client() paho.Client { return s.client }

func (s *Supervisor) resultChan(id string) chan protocol.Result {
	return chanFor(&s.mu, s.results, id, resultBuffer)
}

func (s *Supervisor) stateChan(device string) chan protocol.DeviceState {
	return chanFor(&s.mu, s.states, device, stateBuffer)
}

// chanFor returns m[key], made with buffer n on first use, under mu.
func chanFor[T any](mu *sync.Mutex, m map[string]chan T, key string, n int) chan T {
	mu.Lock()
	defer mu.Unlock()
	if m[key] == nil {
		m[key] = make(chan T, n)
	}
	return m[key]
}

func (s *Supervisor) onResult(_ paho.Client, m paho.Message) {
	var r protocol.Result
	if err := json.Unmarshal(m.Payload(), &r); err != nil {
		s.tb.Errorf("undecodable result %q: %v", m.Payload(), err)
		return
	}
	select {
	case s.resultChan(r.ID) <- r:
	default:
		s.tb.Errorf("result %+v dropped: %d results for %q unread", r, resultBuffer, r.ID)
	}
}

func (s *Supervisor) onState(_ paho.Client, m paho.Message) {
	var st protocol.DeviceState
	if json.Unmarshal(m.Payload(), &st) != nil {
		return
	}
	select {
	case s.stateChan(st.Device) <- st:
	default: // nobody is watching; old states are of no use
	}
}

func (s *Supervisor) onStatus(_ paho.Client, m paho.Message) {
	var st protocol.AgentStatus
	if json.Unmarshal(m.Payload(), &st) != nil || !st.Online {
		return
	}
	rest, _ := strings.CutPrefix(m.Topic(), protocol.DefaultPrefix+"/agents/")
	agent, _, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.online[agent] {
		close(ch)
	}
	delete(s.online, agent)
}

// WatchOnline returns a channel closed when agent next reports itself
// online (a retained status counts only if it arrives after this call).
// Call it before starting the agent.
func (s *Supervisor) WatchOnline(agent string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.online[agent] = append(s.online[agent], ch)
	return ch
}

// PublishRaw publishes payload to device's commands topic and waits for
// the broker's acknowledgement.
func (s *Supervisor) PublishRaw(tb testing.TB, device string, payload []byte) {
	tb.Helper()
	if err := mqtt.Wait(s.client.Publish(protocol.Topics{}.DeviceCommands(device), 1, false, payload), ackTimeout); err != nil {
		tb.Fatal(err)
	}
}

// Publish publishes cmd to device's commands topic without waiting for
// its result; Wait collects it.
func (s *Supervisor) Publish(tb testing.TB, device string, cmd protocol.Command) {
	tb.Helper()
	b, err := json.Marshal(cmd)
	if err != nil {
		tb.Fatal(err)
	}
	s.PublishRaw(tb, device, b)
}

// Send publishes cmd to device and waits for the result with cmd's id.
func (s *Supervisor) Send(tb testing.TB, device string, cmd protocol.Command) protocol.Result {
	tb.Helper()
	s.Publish(tb, device, cmd)
	return s.Wait(tb, cmd.ID)
}

// Wait returns the next result with command id id (received since the
// supervisor connected and not yet returned), waiting up to the timeout.
func (s *Supervisor) Wait(tb testing.TB, id string) protocol.Result {
	tb.Helper()
	select {
	case r := <-s.resultChan(id):
		return r
	case <-time.After(s.timeout):
		tb.Fatalf("no result for %q in %v", id, s.timeout)
		return protocol.Result{}
	}
}

// WaitState consumes device's states, received since the supervisor
// connected, until one says online == want, waiting up to the timeout.
func (s *Supervisor) WaitState(tb testing.TB, device string, want bool) {
	tb.Helper()
	ch := s.stateChan(device)
	timeout := time.After(s.timeout)
	for {
		select {
		case st := <-ch:
			if st.Online == want {
				return
			}
		case <-timeout:
			tb.Fatalf("state of %s never said online=%v in %v", device, want, s.timeout)
		}
	}
}

// Watch subscribes to topic until tb ends and returns its payloads from
// now on, a retained message first. Payloads beyond 64 unread are dropped.
func (s *Supervisor) Watch(tb testing.TB, topic string) <-chan []byte {
	tb.Helper()
	ch := make(chan []byte, 64)
	tok := s.client.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) {
		select {
		case ch <- m.Payload():
		default:
		}
	})
	if err := mqtt.Wait(tok, ackTimeout); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.client.Unsubscribe(topic) })
	return ch
}
