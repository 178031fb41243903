package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/protocol"
)

// announceWait bounds how long send looks for the retained state of its
// device (and the status of that device's agent) before it sends nothing.
// A broker delivers retained messages right after the subscription is
// acknowledged, so a second is ample.
const announceWait = time.Second

// errNotAnnounced: no agent announces the device as online.
var errNotAnnounced = errors.New("not announced")

// announcement is what the broker retains about one device and its agent.
type announcement struct {
	mu     sync.Mutex // guards state and agents
	state  *protocol.DeviceState
	agents map[string]protocol.AgentStatus
	ready  chan struct{} // closed once state and its agent's status are known
	once   sync.Once
}

func (a *announcement) handle(topics protocol.Topics, device string) paho.MessageHandler {
	return func(_ paho.Client, m paho.Message) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if m.Topic() == topics.DeviceState(device) {
			var s protocol.DeviceState
			if json.Unmarshal(m.Payload(), &s) == nil {
				a.state = &s
			}
		} else {
			var st protocol.AgentStatus
			if json.Unmarshal(m.Payload(), &st) == nil {
				a.agents[m.Topic()] = st
			}
		}
		if a.state != nil {
			if _, ok := a.agents[topics.AgentStatus(a.state.Agent)]; ok {
				a.once.Do(func() { close(a.ready) })
			}
		}
	}
}

// checkAnnounced returns nil if an agent announces device online (its
// retained state, and its agent's retained status), an error wrapping
// errNotAnnounced that names the device otherwise. It waits at most
// announceWait after the broker acknowledged the subscriptions.
func checkAnnounced(ctx context.Context, c *common, device string) error {
	topics := protocol.Topics{Prefix: c.prefix}
	a := &announcement{agents: map[string]protocol.AgentStatus{}, ready: make(chan struct{})}
	cl, err := subscribe(ctx, c, []string{topics.DeviceState(device), topics.AgentStatus("+")}, a.handle(topics, device))
	if err != nil {
		return err
	}
	defer cl.Disconnect(100)
	select {
	case <-a.ready:
	case <-time.After(announceWait):
	case <-ctx.Done():
		return ctx.Err()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.verdict(topics, device)
}

func (a *announcement) verdict(topics protocol.Topics, device string) error {
	if a.state == nil {
		return fmt.Errorf("device %s: %w by any agent (no retained state on %s within %v); nothing sent",
			device, errNotAnnounced, topics.DeviceState(device), announceWait)
	}
	if !a.state.Online {
		return fmt.Errorf("device %s: %w: agent %s announced it offline at %s; nothing sent", device, errNotAnnounced, a.state.Agent, a.state.UpdatedAt)
	}
	if st, ok := a.agents[topics.AgentStatus(a.state.Agent)]; ok && !st.Online {
		return fmt.Errorf("device %s: %w: its agent %s is offline (since %s); nothing sent", device, errNotAnnounced, a.state.Agent, st.At)
	}
	return nil
}
