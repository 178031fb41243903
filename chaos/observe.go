package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// awaitDevicesOnline waits until every device of the plan has announced
// itself online (its retained state), straight from the broker.
func awaitDevicesOnline(ctx context.Context, in *install) error {
	missing, err := waitOnline(ctx, in)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("devices never came online: %s (see the agents' logs in %s)", strings.Join(missing, ", "), in.dir)
	}
	return nil
}

// awaitReconnected waits, up to ProgressBound, until every device is
// online again after the faults; the probe judges what is still not.
func (in *install) awaitReconnected(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ProgressBound)
	defer cancel()
	_, err := waitOnline(ctx, in)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// waitOnline subscribes to the device states and returns the devices not
// online when ctx ends, or none as soon as all are.
func waitOnline(ctx context.Context, in *install) ([]string, error) {
	want := map[string]bool{}
	for _, d := range in.plan.Domains {
		for _, dev := range d.Devices {
			want[dev.ID] = false
		}
	}
	var mu sync.Mutex
	all := make(chan struct{})
	closed := false
	onState := func(_ paho.Client, m paho.Message) {
		var s protocol.DeviceState
		if json.Unmarshal(m.Payload(), &s) != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, ok := want[s.Device]; ok {
			want[s.Device] = s.Online
		}
		for _, on := range want {
			if !on {
				return
			}
		}
		if !closed {
			closed = true
			close(all)
		}
	}
	topics := protocol.Topics{}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := mqtt.Dial(dctx, mqtt.Config{Broker: "tcp://" + in.brokerAddr, ClientID: fmt.Sprintf("fencechaos-observer-%d", time.Now().UnixNano()),
		KeepAlive: 2 * time.Second, ConnectTimeout: 2 * time.Second, MaxReconnectInterval: time.Second},
		map[string]paho.MessageHandler{topics.DeviceState("+"): onState})
	if err != nil {
		return nil, fmt.Errorf("observer: %w", err)
	}
	defer c.Disconnect(100)
	select {
	case <-all:
		return nil, nil
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	var missing []string
	for id, on := range want {
		if !on {
			missing = append(missing, id)
		}
	}
	sort.Strings(missing)
	return missing, nil
}
