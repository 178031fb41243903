package benchagent

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// rpcClient is one supervisor connection: it sends commands with its own
// reply_to and hands each result to the caller waiting for its id. Safe
// for concurrent use; concurrent calls must use distinct ids.
type rpcClient struct {
	client  paho.Client
	replyTo string

	mu      sync.Mutex // guards waiting
	waiting map[string]chan protocol.Result
}

func dialRPC(broker, name string) (*rpcClient, error) {
	c := &rpcClient{replyTo: "fencegate/v1/replies/bench-" + name, waiting: map[string]chan protocol.Result{}}
	opts, err := mqtt.Config{Broker: broker, ClientID: name}.ClientOptions(nil)
	if err != nil {
		return nil, err
	}
	c.client = paho.NewClient(opts)
	if err := mqtt.Wait(c.client.Connect(), 10*time.Second); err != nil {
		return nil, fmt.Errorf("supervisor %s: %w", name, err)
	}
	if err := mqtt.Wait(c.client.Subscribe(c.replyTo, 1, c.onResult), 10*time.Second); err != nil {
		c.client.Disconnect(0)
		return nil, fmt.Errorf("supervisor %s: %w", name, err)
	}
	return c, nil
}

func (c *rpcClient) onResult(_ paho.Client, m paho.Message) {
	var r protocol.Result
	if json.Unmarshal(m.Payload(), &r) != nil {
		return
	}
	c.mu.Lock()
	ch := c.waiting[r.ID]
	c.mu.Unlock()
	if ch != nil {
		select {
		case ch <- r:
		default:
		}
	}
}

// callTimeout bounds the wait for one result.
const callTimeout = 60 * time.Second

// call publishes cmd to topic and waits for its result.
func (c *rpcClient) call(ctx context.Context, topic string, cmd protocol.Command) (protocol.Result, error) {
	ch := make(chan protocol.Result, 1)
	c.mu.Lock()
	c.waiting[cmd.ID] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiting, cmd.ID)
		c.mu.Unlock()
	}()
	cmd.ReplyTo = c.replyTo
	payload, err := json.Marshal(cmd)
	if err != nil {
		return protocol.Result{}, err
	}
	c.client.Publish(topic, 1, false, payload)
	t := time.NewTimer(callTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r, nil
	case <-t.C:
		return protocol.Result{}, fmt.Errorf("%w: no result for %s in %v", ErrNoAnswer, cmd.ID, callTimeout)
	case <-ctx.Done():
		return protocol.Result{}, ctx.Err()
	}
}

func (c *rpcClient) close() { c.client.Disconnect(100) }

// clients connects n supervisors (n ≥ 1).
func clients(broker string, n int) ([]*rpcClient, error) {
	out := make([]*rpcClient, 0, n)
	for i := range n {
		c, err := dialRPC(broker, fmt.Sprintf("bench-sup%d", i))
		if err != nil {
			closeAll(out)
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func closeAll(cs []*rpcClient) {
	for _, c := range cs {
		c.close()
	}
}
