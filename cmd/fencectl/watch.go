package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// runWatch: fencectl watch [DEVICE ...] — state and results as they
// happen: on the devices' results topics and, so that results answered on
// a sender's reply_to are seen too, in the reply namespace (docs/fencectl.md).
func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("watch", stderr)
	c := addCommon(fs)
	dur := fs.Duration("for", 0, "stop after this long (default: until interrupted)")
	replies := fs.Bool("replies", true, "also show results answered on reply topics (the reply namespace and every --reply-prefix)")
	var prefixes []string
	fs.Func("reply-prefix", "a further reply prefix the agent is configured with (mqtt.reply_prefixes) to watch (repeatable)", func(v string) error {
		prefixes = append(prefixes, v)
		return nil
	})
	devices, err := interspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(devices) == 0 {
		devices = []string{"+"}
	}
	if *dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	var mu sync.Mutex // serializes output
	topics := protocol.Topics{Prefix: c.prefix}
	var filters []string
	for _, d := range devices {
		filters = append(filters, topics.DeviceState(d), topics.DeviceResults(d))
	}
	if *replies {
		filters = append(filters, replyFilters(topics, prefixes)...)
	}
	w := watcher{topics: topics, devices: devices, json: c.json, out: stdout}
	print := func(_ paho.Client, m paho.Message) {
		mu.Lock()
		defer mu.Unlock()
		w.event(m.Topic(), m.Payload())
	}
	cl, err := subscribe(ctx, c, filters, print)
	if err != nil {
		return fail(stderr, err)
	}
	<-ctx.Done()
	cl.Disconnect(100)
	return exitOK
}

// subscribe connects a plain MQTT client, subscribes filters to handler
// (again after every reconnection) and returns once the broker
// acknowledged them, within the --timeout.
func subscribe(ctx context.Context, c *common, filters []string, handler paho.MessageHandler) (paho.Client, error) {
	cfg := c.mqtt
	cfg.ClientID = fmt.Sprintf("fencectl-watch-%d", time.Now().UnixNano())
	subs := make(map[string]paho.MessageHandler, len(filters))
	for _, f := range filters {
		subs[f] = handler
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return mqtt.Dial(ctx, cfg, subs)
}

// replyFilters are the filters of the reply namespace and of prefixes.
func replyFilters(topics protocol.Topics, prefixes []string) []string {
	out := []string{topics.Replies() + "#"}
	for _, p := range prefixes {
		out = append(out, strings.TrimSuffix(p, "/")+"/#")
	}
	return out
}

// watcher prints what watch receives.
type watcher struct {
	topics  protocol.Topics
	devices []string // as given; "+" for all
	json    bool
	out     io.Writer
}

// event prints a device topic's message, or a result answered on a reply
// topic if it is for a watched device; lease responses (also on reply
// topics) are skipped.
func (w watcher) event(topic string, payload []byte) {
	if _, _, err := w.topics.ParseDeviceTopic(topic); err == nil {
		printEvent(w.out, w.json, w.topics, topic, payload)
		return
	}
	var r protocol.Result
	if json.Unmarshal(payload, &r) != nil || r.Device == "" || r.Status == "" || !w.watched(r.Device) {
		return
	}
	if w.json {
		fmt.Fprintf(w.out, "{\"topic\":%q,\"payload\":%s}\n", topic, compactJSON(payload))
		return
	}
	fmt.Fprintf(w.out, "result %s (reply to %s)\n", describeResult(r), topic)
}

func (w watcher) watched(device string) bool {
	for _, d := range w.devices {
		if d == "+" || d == device {
			return true
		}
	}
	return false
}

func printEvent(w io.Writer, asJSON bool, topics protocol.Topics, topic string, payload []byte) {
	if asJSON {
		fmt.Fprintf(w, "{\"topic\":%q,\"payload\":%s}\n", topic, compactJSON(payload))
		return
	}
	_, leaf, _ := topics.ParseDeviceTopic(topic)
	switch leaf {
	case "state":
		var s protocol.DeviceState
		if json.Unmarshal(payload, &s) == nil {
			fmt.Fprintln(w, describeState(s))
			return
		}
	case "results":
		var r protocol.Result
		if json.Unmarshal(payload, &r) == nil {
			fmt.Fprintln(w, "result", describeResult(r))
			return
		}
	}
	fmt.Fprintf(w, "%s %s\n", topic, payload)
}

func describeState(s protocol.DeviceState) string {
	f := "no fence"
	if s.Fence != nil {
		f = fmt.Sprintf("fence %d.%d %s", s.Fence.Epoch, s.Fence.Seq, s.Fence.Holder)
	}
	online := "online"
	if !s.Online {
		online = "OFFLINE"
	}
	return fmt.Sprintf("state  %s (agent %s) %s, %s, at %s", s.Device, s.Agent, online, f, s.UpdatedAt)
}

func compactJSON(b []byte) string {
	if !json.Valid(b) {
		q, _ := json.Marshal(string(b))
		return string(q)
	}
	return strings.TrimSpace(string(b))
}

// runDevices: fencectl devices — every device with a retained state.
func runDevices(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("devices", stderr)
	c := addCommon(fs)
	settle := fs.Duration("settle", time.Second, "how long to collect retained states")
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	var mu sync.Mutex // guards states
	states := map[string]protocol.DeviceState{}
	topics := protocol.Topics{Prefix: c.prefix}
	cl, err := subscribe(ctx, c, []string{topics.DeviceState("+")}, func(_ paho.Client, m paho.Message) {
		var s protocol.DeviceState
		if json.Unmarshal(m.Payload(), &s) == nil && s.Device != "" {
			mu.Lock()
			states[s.Device] = s
			mu.Unlock()
		}
	})
	if err != nil {
		return fail(stderr, err)
	}
	select {
	case <-time.After(*settle):
	case <-ctx.Done():
	}
	cl.Disconnect(100)
	mu.Lock()
	defer mu.Unlock()
	printStates(stdout, c.json, states)
	return exitOK
}

func printStates(w io.Writer, asJSON bool, states map[string]protocol.DeviceState) {
	ids := make([]string, 0, len(states))
	for id := range states {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if asJSON {
			printJSON(w, states[id])
		} else {
			fmt.Fprintln(w, describeState(states[id]))
		}
	}
}
