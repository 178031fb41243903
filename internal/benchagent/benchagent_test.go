package benchagent

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/internal/benchload"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

func startBroker(t *testing.T) *mqtt.Embedded {
	t.Helper()
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// startAgent starts a bench agent with devices devices on b, stopped at
// the end of the test.
func startAgent(t *testing.T, b *mqtt.Embedded, devices int) (*Agent, *benchload.Tokens) {
	t.Helper()
	tokens, err := benchload.NewTokens()
	if err != nil {
		t.Fatal(err)
	}
	a, err := StartAgent(t.TempDir(), b.URL(), devices, tokens.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Stop(); err != nil {
			t.Error(err)
		}
	})
	return a, tokens
}

func TestCommandsAreAppliedAndStaleOnesFail(t *testing.T) {
	b := startBroker(t)
	a, tokens := startAgent(t, b, 3)
	load := Load{Broker: b.URL(), Tokens: tokens, InFlight: 2}
	for _, adv := range []bool{false, true, false} {
		load.Advancing, load.Limit = adv, benchload.Limit{Ops: 7}
		res, err := a.Commands(t.Context(), load)
		if err != nil || res.Ops != 7 {
			t.Fatalf("advancing=%v: %d ops, err %v", adv, res.Ops, err)
		}
	}
	a.next = make([]int, 3) // reuse positions below the fences: answered stale_token
	load.Advancing = true
	if _, err := a.Commands(t.Context(), load); !errors.Is(err, ErrOutcome) {
		t.Fatalf("commands below the fence: err %v, want ErrOutcome", err)
	}
}

func TestEchoAnswersEveryRequest(t *testing.T) {
	b := startBroker(t)
	tokens, err := benchload.NewTokens()
	if err != nil {
		t.Fatal(err)
	}
	e, err := StartEcho(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	res, err := e.RoundTrips(t.Context(), Load{Broker: b.URL(), Tokens: tokens, InFlight: 5, Limit: benchload.Limit{Ops: 20}})
	if err != nil || res.Ops != 20 {
		t.Fatalf("%d round trips, err %v", res.Ops, err)
	}
}

func TestRSSIsPositive(t *testing.T) {
	rss, err := RSS()
	if err != nil {
		t.Skipf("no /proc/self/status here: %v", err)
	}
	if rss < 1<<20 {
		t.Fatalf("RSS %d bytes, a Go test process holds more than 1 MiB", rss)
	}
}

// A steady run first sends every device one command with its token,
// untimed and uncounted, so that the timed commands use a token the agent
// has verified and fenced at, even on devices the run sends one command.
func TestSteadyRunWarmsEveryDeviceFirst(t *testing.T) {
	b := startBroker(t)
	a, tokens := startAgent(t, b, 3)
	var mu sync.Mutex
	perDevice := map[string]int{}
	count := func(_ paho.Client, m paho.Message) {
		mu.Lock()
		perDevice[m.Topic()]++
		mu.Unlock()
	}
	c, err := mqtt.Dial(t.Context(), mqtt.Config{Broker: b.URL(), ClientID: "count"},
		map[string]paho.MessageHandler{protocol.Topics{}.AllDeviceCommands(): count})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(100) })
	var done atomic.Int64
	load := Load{Broker: b.URL(), Tokens: tokens, InFlight: 2, Limit: benchload.Limit{Ops: 1}, Done: &done}
	res, err := a.Commands(t.Context(), load)
	if err != nil || res.Ops != 1 || len(res.Latencies) != 1 || done.Load() != 1 {
		t.Fatalf("steady run: %d ops timed, %d counted done, err %v; want 1 and 1", res.Ops, done.Load(), err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n, total := len(perDevice), 0
		for _, k := range perDevice {
			total += k
		}
		mu.Unlock()
		if n == 3 && total == 4 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("commands seen per device %v; want every device once (warm-up) and one more", perDevice)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
