package etcdtest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// httpVia returns a supervisor's transport over the replicas' HTTP APIs,
// starting at replica first and moving to the next on a transport error
// (a killed replica).
func httpVia(hc *http.Client, reps []*replica, domain string, first int) func(context.Context, protocol.LeaseOp, protocol.Request) (protocol.Response, error) {
	cur := first
	return func(ctx context.Context, op protocol.LeaseOp, req protocol.Request) (protocol.Response, error) {
		var err error
		for range reps {
			var r protocol.Response
			if r, err = httpDo(ctx, hc, reps[cur%len(reps)].url, op, domain, req); err == nil {
				return r, nil
			}
			cur++
		}
		return protocol.Response{}, err
	}
}

// mqttClient sends lease requests over MQTT and correlates the responses
// on its reply topic by request id. Safe for concurrent use.
type mqttClient struct {
	c       paho.Client
	replyTo string
	mu      sync.Mutex // guards waiting
	waiting map[string]chan protocol.Response
}

func newMQTTClient(t testing.TB, broker, id string) *mqttClient {
	m := &mqttClient{replyTo: protocol.Topics{}.ReplyTopic(id), waiting: map[string]chan protocol.Response{}} // the controller replies only in the reply namespace
	subscribed := make(chan error, 1)
	opts, err := mqtt.Config{Broker: broker, ClientID: id}.ClientOptions(func(c paho.Client) {
		tok := c.Subscribe(m.replyTo, 1, m.onReply)
		go func() { subscribed <- mqtt.Wait(tok, 10*time.Second) }()
	})
	if err != nil {
		t.Fatal(err)
	}
	m.c = paho.NewClient(opts)
	if err := mqtt.Wait(m.c.Connect(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := <-subscribed; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.c.Disconnect(50) })
	return m
}

func (m *mqttClient) onReply(_ paho.Client, msg paho.Message) {
	var r protocol.Response
	if json.Unmarshal(msg.Payload(), &r) != nil {
		return
	}
	m.mu.Lock()
	ch := m.waiting[r.RequestID]
	m.mu.Unlock()
	if ch != nil {
		select {
		case ch <- r:
		default: // a second answer: ignored, as a supervisor would
		}
	}
}

var errNoAnswer = errors.New("no MQTT answer")

// do publishes req and waits up to 20 s for its answer.
func (m *mqttClient) do(ctx context.Context, op protocol.LeaseOp, domain string, req protocol.Request) (protocol.Response, error) {
	req.ReplyTo = m.replyTo
	payload, _ := json.Marshal(req)
	ch := make(chan protocol.Response, 1)
	m.mu.Lock()
	m.waiting[req.RequestID] = ch
	m.mu.Unlock()
	defer func() { m.mu.Lock(); delete(m.waiting, req.RequestID); m.mu.Unlock() }()
	if err := mqtt.Wait(m.c.Publish(protocol.Topics{}.Lease(domain, string(op)), 1, false, payload), 10*time.Second); err != nil {
		return protocol.Response{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-time.After(20 * time.Second):
		return protocol.Response{}, errNoAnswer
	case <-ctx.Done():
		return protocol.Response{}, ctx.Err()
	}
}

func mqttVia(m *mqttClient, domain string) func(context.Context, protocol.LeaseOp, protocol.Request) (protocol.Response, error) {
	return func(ctx context.Context, op protocol.LeaseOp, req protocol.Request) (protocol.Response, error) {
		return m.do(ctx, op, domain, req)
	}
}
