package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// demoSupervisorCmd is the hidden command the demo runs as supervisor A.
const demoSupervisorCmd = "demo-supervisor-a"

// runDemoSupervisor is supervisor A of the demo, in its own process so the
// demo can stop it with SIGSTOP. It takes the lease and writes to every
// device in a loop, printing one JSON event per line. Like a real process
// that was frozen between checking its lease and writing, it does not look
// at its lease before a write: the fence at the agent is what stops it. It
// ends once every device has refused it as stale.
func runDemoSupervisor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(demoSupervisorCmd, flag.ContinueOnError)
	broker := fs.String("broker", "", "broker URL")
	domain := fs.String("domain", "plant", "domain")
	devices := fs.String("devices", "pump1", "devices")
	ttl := fs.Duration("ttl", 1500*time.Millisecond, "lease TTL")
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	e := &emitter{w: stdout}
	if err := superviseA(ctx, *broker, *domain, strings.Split(*devices, ","), *ttl, e); err != nil {
		e.emit(demoEvent{Event: "error", Error: err.Error()})
		return exitError
	}
	return exitOK
}

func superviseA(ctx context.Context, broker, domain string, devices []string, ttl time.Duration, e *emitter) error {
	c, err := supervisor.Dial(ctx, supervisor.Config{MQTT: mqtt.Config{Broker: broker, ClientID: "demo-A"}, Holder: "A",
		RetryInterval: 300 * time.Millisecond})
	if err != nil {
		return err
	}
	defer c.Close()
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := c.Acquire(actx, domain, supervisor.AcquireOptions{TTL: ttl})
	if err != nil {
		return err
	}
	e.emit(demoEvent{Event: "acquired", Token: l.Token()})
	go func() {
		<-l.Done()
		e.emit(demoEvent{Event: "lost", Error: l.Err().Error()})
	}()
	return writeUntilFenced(ctx, c, l.Token(), devices, e)
}

// writeUntilFenced writes value 1, 2, … to each device until each has
// answered stale_token once (at most 200 rounds), under token.
func writeUntilFenced(ctx context.Context, c *supervisor.Client, token string, devices []string, e *emitter) error {
	refused := map[string]bool{}
	applied := 0
	for value := 1; value <= 200; value++ {
		for _, d := range devices {
			if refused[d] {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			res, err := c.SendToken(sctx, token, d, "set", map[string]any{"value": value})
			cancel()
			if res.Status == protocol.StatusApplied {
				applied++
			}
			refused[d] = res.Code == protocol.CodeStaleToken
			ev := demoEvent{Event: "result", Device: d, Value: value, Result: &res, Applied: applied}
			if res.ID == "" && err != nil {
				ev.Result, ev.Error = nil, err.Error()
			}
			e.emit(ev)
		}
		if len(refused) == len(devices) && allTrue(refused) {
			e.emit(demoEvent{Event: "done"})
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("not fenced after 200 rounds")
}

func allTrue(m map[string]bool) bool {
	for _, v := range m {
		if !v {
			return false
		}
	}
	return true
}

// emitter prints demo events as JSON lines, one at a time.
type emitter struct {
	mu sync.Mutex // serializes lines
	w  io.Writer
}

func (e *emitter) emit(ev demoEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, _ := json.Marshal(ev)
	fmt.Fprintln(e.w, string(b))
}
