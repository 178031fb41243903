package supervisor

import (
	"context"
	"encoding/json"
	"fmt"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// WaitHandover waits until the agent owning device reports (in its
// retained state) the device fenced at this lease's token — from then on
// the previous holder's commands are rejected there, even before this
// lease has sent anything. It returns ErrStale if the device is already
// fenced at a newer lease, and ctx's error if ctx ends first.
func (l *Lease) WaitHandover(ctx context.Context, device string) error {
	topic := l.c.topics.DeviceState(device)
	states := make(chan mqtt.DeviceState, 8)
	t := l.c.client.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) {
		var s mqtt.DeviceState
		if json.Unmarshal(m.Payload(), &s) == nil {
			select {
			case states <- s:
			default:
			}
		}
	})
	if err := waitToken(ctx, t); err != nil {
		return fmt.Errorf("supervisor: subscribe %s: %w", topic, err)
	}
	defer l.c.client.Unsubscribe(topic)
	for {
		select {
		case s := <-states:
			if s.Fence == nil {
				continue
			}
			switch cmp := fence.ComparePosition(s.Fence.Epoch, s.Fence.Seq, l.token.Epoch, l.token.Seq); {
			case cmp == 0:
				return nil
			case cmp > 0:
				return fmt.Errorf("%w: %s is fenced at %d.%d/%s", ErrStale, device, s.Fence.Epoch, s.Fence.Seq, s.Fence.Holder)
			}
		case <-ctx.Done():
			return fmt.Errorf("supervisor: hand-over of %s: %w", device, ctx.Err())
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
