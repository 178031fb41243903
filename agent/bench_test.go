package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// rpcClient is a supervisor that sends commands with its own reply_to and
// matches results to callers by command id. Unlike supervisor it never
// blocks the paho callback and every wait is bounded, so it can be used
// while the agent is down. Safe for concurrent use; concurrent calls must
// use distinct ids.
type rpcClient struct {
	client  paho.Client
	replyTo string
	onAny   func(protocol.Result) // if set, called (in the paho callback) for every result received
	bad     atomic.Int64          // undecodable results received

	mu      sync.Mutex // guards waiting
	waiting map[string]chan protocol.Result
}

func newRPCClient(tb testing.TB, broker, name string, onAny func(protocol.Result)) *rpcClient {
	tb.Helper()
	c := &rpcClient{replyTo: "fencegate/v1/replies/rpc-" + name, onAny: onAny, waiting: map[string]chan protocol.Result{}}
	opts, err := mqtt.Config{Broker: broker, ClientID: name}.ClientOptions(func(cl paho.Client) {
		cl.Subscribe(c.replyTo, 1, c.onResult)
	})
	if err != nil {
		tb.Fatal(err)
	}
	c.client = paho.NewClient(opts)
	if err := mqtt.Wait(c.client.Connect(), 10*time.Second); err != nil {
		tb.Fatal(err)
	}
	// Subscribed once more, waited for: the first call must not race the
	// subscription made by the connect handler.
	if err := mqtt.Wait(c.client.Subscribe(c.replyTo, 1, c.onResult), 10*time.Second); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.client.Disconnect(100) })
	return c
}

func (c *rpcClient) onResult(_ paho.Client, m paho.Message) {
	var r protocol.Result
	if err := json.Unmarshal(m.Payload(), &r); err != nil {
		c.bad.Add(1)
		return
	}
	if c.onAny != nil {
		c.onAny(r)
	}
	c.mu.Lock()
	ch := c.waiting[r.ID]
	c.mu.Unlock()
	if ch != nil {
		select {
		case ch <- r:
		default: // the caller has its answer already
		}
	}
}

// send publishes cmd for device with the client's reply_to, waiting (at
// most 5 s) for the broker's acknowledgement.
func (c *rpcClient) send(device string, cmd protocol.Command) error {
	cmd.ReplyTo = c.replyTo
	return mqtt.Wait(c.client.Publish(protocol.Topics{}.DeviceCommands(device), 1, false, mustJSON(cmd)), 5*time.Second)
}

// call sends cmd and waits up to timeout (or until ctx is done) for a
// result with its id; ok is false if none came.
func (c *rpcClient) call(ctx context.Context, device string, cmd protocol.Command, timeout time.Duration) (r protocol.Result, ok bool, err error) {
	ch := make(chan protocol.Result, 1)
	c.mu.Lock()
	c.waiting[cmd.ID] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiting, cmd.ID)
		c.mu.Unlock()
	}()
	if err := c.send(device, cmd); err != nil {
		return protocol.Result{}, false, err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r, true, nil
	case <-t.C:
	case <-ctx.Done():
	}
	return protocol.Result{}, false, nil
}

// BenchmarkCommands measures the agent end to end over a real (embedded)
// broker: supervisors send "set" commands, one in flight per device, and
// wait for each result. Reported: cmds/s and the p50/p99 latency of one
// command (publish → result received). token=advancing signs a new token
// for every command (each is verified once and raises the fence);
// token=steady uses one token per device (verified once, cached).
// Compare with BenchmarkMQTTRoundTrip for the broker's share.
func BenchmarkCommands(b *testing.B) {
	for _, devices := range []int{1, 100} {
		for _, advancing := range []bool{true, false} {
			mode := map[bool]string{true: "advancing", false: "steady"}[advancing]
			b.Run(fmt.Sprintf("devices=%d/token=%s", devices, mode), func(b *testing.B) {
				benchCommands(b, devices, advancing)
			})
		}
	}
}

func benchCommands(b *testing.B, devices int, advancing bool) {
	ids := make([]string, devices)
	for i := range ids {
		ids[i] = fmt.Sprintf("d%03d", i)
	}
	h := newHarness(b, ids...)
	for i := range h.cfg.Devices {
		h.cfg.Devices[i].Settings = simSettings(b, "latency: 0s") // no apply log: measure the agent
		h.cfg.Devices[i].Domain = benchDomain(i)                  // each device a domain, as by default
	}
	h.start()
	clients := benchClients(b, h.broker.URL(), devices)
	counts := split(b.N, devices)
	tokens := benchTokens(b, h.signer, counts, advancing)
	runRequests(b, clients, counts, func(dev, k int) (string, protocol.Command) {
		tok := tokens[dev][0]
		if advancing {
			tok = tokens[dev][k]
		}
		return ids[dev], protocol.Command{ID: fmt.Sprintf("c%d-%d", dev, k), Token: tok, Op: "set",
			Args: json.RawMessage(fmt.Sprintf(`{"value":%d}`, k))}
	}, func(r protocol.Result) error {
		if r.Status != protocol.StatusApplied || r.Code != protocol.CodeOK {
			return fmt.Errorf("result %s: %s/%s (%s)", r.ID, r.Status, r.Code, r.Message)
		}
		return nil
	})
}

// BenchmarkMQTTRoundTrip is the bare broker round trip the agent's
// latency contains: a responder client echoes every command, as is, to its
// reply_to; same broker, same clients, same QoS 1 and payloads as
// BenchmarkCommands, with inflight=N concurrent requests like devices=N.
func BenchmarkMQTTRoundTrip(b *testing.B) {
	for _, inflight := range []int{1, 100} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			h := newHarness(b) // its broker only; no agent
			startEchoResponder(b, h.broker.URL())
			clients := benchClients(b, h.broker.URL(), inflight)
			counts := split(b.N, inflight)
			tokens := benchTokens(b, h.signer, []int{1}, false)
			runRequests(b, clients, counts, func(dev, k int) (string, protocol.Command) {
				return fmt.Sprintf("d%03d", dev), protocol.Command{ID: fmt.Sprintf("c%d-%d", dev, k), Token: tokens[0][0],
					Op: "set", Args: json.RawMessage(fmt.Sprintf(`{"value":%d}`, k))}
			}, func(r protocol.Result) error { return nil })
		})
	}
}

// startEchoResponder subscribes to every device's commands topic and
// publishes each payload unchanged to the command's reply_to.
func startEchoResponder(tb testing.TB, broker string) {
	tb.Helper()
	var resp paho.Client
	echo := func(_ paho.Client, m paho.Message) {
		var c struct {
			ReplyTo string `json:"reply_to"`
		}
		if json.Unmarshal(m.Payload(), &c) == nil && c.ReplyTo != "" {
			resp.Publish(c.ReplyTo, 1, false, m.Payload())
		}
	}
	opts, err := mqtt.Config{Broker: broker, ClientID: "echo"}.ClientOptions(nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp = paho.NewClient(opts)
	if err := mqtt.Wait(resp.Connect(), 10*time.Second); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { resp.Disconnect(100) })
	if err := mqtt.Wait(resp.Subscribe(protocol.Topics{}.AllDeviceCommands(), 1, echo), 10*time.Second); err != nil {
		tb.Fatal(err)
	}
}

// benchClients connects up to 4 supervisors for n concurrent senders.
func benchClients(tb testing.TB, broker string, n int) []*rpcClient {
	out := make([]*rpcClient, min(n, 4))
	for i := range out {
		out[i] = newRPCClient(tb, broker, fmt.Sprintf("bench%d", i), nil)
	}
	return out
}

// split divides total commands among n senders.
func split(total, n int) []int {
	counts := make([]int, n)
	for i := range counts {
		counts[i] = total / n
		if i < total%n {
			counts[i]++
		}
	}
	return counts
}

// benchDomain is bench device dev's fencing domain.
func benchDomain(dev int) string { return fmt.Sprintf("plant-%03d", dev) }

// benchTokens signs, per device, one token per command (advancing: seq
// 1, 2, …) or a single one (steady), in the device's own domain. Each
// device has its own holder, so no two devices share a token and its
// cached verification.
func benchTokens(tb testing.TB, s *fence.Signer, counts []int, advancing bool) [][]string {
	out := make([][]string, len(counts))
	for dev, n := range counts {
		if !advancing {
			n = 1
		}
		out[dev] = make([]string, n)
		for k := range n {
			tok, err := s.Sign(fence.Token{Domain: benchDomain(dev), Epoch: 1, Seq: uint64(k + 1), Holder: fmt.Sprintf("h%d", dev),
				IssuedAt: int64(k + 1), TTLms: 60000})
			if err != nil {
				tb.Fatal(err)
			}
			out[dev][k] = tok.Raw
		}
	}
	return out
}

// runRequests runs counts[dev] sequential request/result round trips for
// every sender dev concurrently (sender dev uses client dev%len(clients)),
// timing each, and reports throughput and latency percentiles. check
// judges each result; the first error fails the benchmark.
func runRequests(b *testing.B, clients []*rpcClient, counts []int,
	mk func(dev, k int) (string, protocol.Command), check func(protocol.Result) error) {
	lat := make([][]time.Duration, len(counts))
	var (
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
	b.ResetTimer()
	start := time.Now()
	for dev, n := range counts {
		c := clients[dev%len(clients)]
		lat[dev] = make([]time.Duration, 0, n)
		wg.Go(func() {
			for k := range n {
				device, cmd := mk(dev, k)
				t0 := time.Now()
				r, ok, err := c.call(context.Background(), device, cmd, 30*time.Second)
				switch {
				case err != nil:
					fail(err)
					return
				case !ok:
					fail(fmt.Errorf("no result for %s in 30 s", cmd.ID))
					return
				}
				lat[dev] = append(lat[dev], time.Since(t0))
				if err := check(r); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "cmds/s")
	b.ReportMetric(ms(all[len(all)*50/100]), "p50-ms")
	b.ReportMetric(ms(all[min(len(all)-1, len(all)*99/100)]), "p99-ms")
}
