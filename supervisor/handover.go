package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// WaitHandover waits until the agent owning device reports (in its
// retained state) the device fenced at this lease's token — same position
// and same holder — from then on the previous holder's commands are
// rejected there, even before this lease has sent anything.
//
// It returns ErrStale, and marks the lease lost, if the device is fenced
// at a newer position of this lease's domain; ErrWrongDomain if the state
// names another domain, or the lease's position with another holder (a
// lease of another domain, or a controller fault); the lease's error if it
// is lost (or released) before or meanwhile; ctx's error if ctx ends
// first. A device state names its domain and is checked against it; a
// state from an older agent without the field is taken to be of this
// lease's domain — call it only for devices of that domain.
//
// Calls for the same device, from one lease or several leases of one
// client, may run concurrently: they share one subscription to the
// device's state, which ends with the last of them.
func (l *Lease) WaitHandover(ctx context.Context, device string) error {
	if err := fence.CheckID("device", device); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("supervisor: hand-over of %s: %w", device, err)
	}
	w, states := l.c.watchState(device)
	defer l.c.unwatchState(device, w, states)
	if err := waitToken(ctx, w.sub); err != nil {
		return fmt.Errorf("supervisor: subscribe %s: %w", l.c.topics.DeviceState(device), err)
	}
	for {
		select {
		case s := <-states:
			if decided, err := l.judgeHandover(device, s); decided {
				return err
			}
		case <-l.ctx.Done():
			return fmt.Errorf("supervisor: hand-over of %s: %w", device, l.Err())
		case <-ctx.Done():
			return fmt.Errorf("supervisor: hand-over of %s: %w", device, ctx.Err())
		}
	}
}

// handoverState is a device's retained state.
type handoverState = protocol.DeviceState

// judgeHandover decides on one state of device: (true, nil) the device is
// fenced at this lease; (true, err) it will not be; (false, nil) not yet.
// A newer position of this domain marks the lease lost.
func (l *Lease) judgeHandover(device string, s handoverState) (bool, error) {
	if err := l.Err(); err != nil { // a state and Done may be ready at once: loss wins
		return true, fmt.Errorf("supervisor: hand-over of %s: %w", device, err)
	}
	f := s.Fence
	switch {
	case f == nil:
		return false, nil
	case s.Domain != "" && s.Domain != l.domain:
		return true, fmt.Errorf("%w: %s is in domain %s, not %s", ErrWrongDomain, device, s.Domain, l.domain)
	}
	tok := l.Fence()
	switch cmp := fence.ComparePosition(f.Epoch, f.Seq, tok.Epoch, tok.Seq); {
	case cmp < 0:
		return false, nil
	case cmp == 0 && f.Holder == tok.Holder:
		return true, nil
	case cmp == 0:
		return true, fmt.Errorf("%w: %s is fenced at this lease's position %d.%d by holder %s, not %s: a lease of another domain (or a controller fault)",
			ErrWrongDomain, device, f.Epoch, f.Seq, f.Holder, tok.Holder)
	}
	l.lose(fmt.Errorf("device %s is fenced at a newer lease %d.%d/%s", device, f.Epoch, f.Seq, f.Holder))
	return true, fmt.Errorf("%w: %s is fenced at %d.%d/%s", ErrStale, device, f.Epoch, f.Seq, f.Holder)
}

// stateWatch is this client's one subscription to a device's state topic,
// shared by every WaitHandover on that device. Each waiter gets a one-slot
// channel holding the newest state not yet read (a fence only rises, so
// the newest state is the one to judge).
type stateWatch struct {
	sub  paho.Token // the subscription; done when the broker answered
	refs int        // waiters; guarded by Client.watchMu

	mu      sync.Mutex // guards last and waiters; taken by paho's callback
	last    *handoverState
	waiters map[chan handoverState]struct{}
}

// watchState joins (or starts) the watch of device's state and returns it
// with this waiter's channel, primed with the newest state already seen.
// Subscribe and unsubscribe calls are made under watchMu, so paho's routes
// and the packets to the broker follow the order of the reference counts.
func (c *Client) watchState(device string) (*stateWatch, chan handoverState) {
	topic := c.topics.DeviceState(device)
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	w := c.watches[topic]
	if w == nil {
		w = &stateWatch{waiters: map[chan handoverState]struct{}{}}
		w.sub = c.client.Subscribe(topic, 1, w.onState)
		c.watches[topic] = w
	}
	w.refs++
	return w, w.join()
}

// unwatchState leaves w; the last waiter to leave unsubscribes.
func (c *Client) unwatchState(device string, w *stateWatch, ch chan handoverState) {
	w.leave(ch)
	topic := c.topics.DeviceState(device)
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if w.refs--; w.refs == 0 {
		delete(c.watches, topic)
		c.client.Unsubscribe(topic)
	}
}

func (w *stateWatch) join() chan handoverState {
	ch := make(chan handoverState, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last != nil {
		ch <- *w.last
	}
	w.waiters[ch] = struct{}{}
	return ch
}

func (w *stateWatch) leave(ch chan handoverState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiters, ch)
}

// onState is paho's callback: it never blocks.
func (w *stateWatch) onState(_ paho.Client, m paho.Message) {
	var s handoverState
	if json.Unmarshal(m.Payload(), &s) != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = &s
	for ch := range w.waiters {
		offerNewest(ch, s)
	}
}

// offerNewest puts s into the one-slot ch, replacing an unread older
// state. Only onState sends, under stateWatch.mu, so it ends.
func offerNewest(ch chan handoverState, s handoverState) {
	for {
		select {
		case ch <- s:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

func waitToken(ctx context.Context, t paho.Token) error {
	select {
	case <-t.Done():
		return t.Error()
	case <-ctx.Done():
		return ctx.Err()
	}
}
