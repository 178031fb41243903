//go:build linux

package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fence/fencetest"
	"github.com/fencegate/fencegate/internal/mqtttest"
	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// procEnv runs the agent as a real child process (the test binary
// re-executed into TestAgentChild) against a broker owned by the test, so
// the agent can be SIGKILLed and restarted while the broker, the
// supervisors and the files stay.
type procEnv struct {
	t       *testing.T
	dir     string
	dataDir string
	cfgPath string
	outPath string // the children's stdout and stderr, appended run after run
	broker  *mqtt.Embedded
	signer  *fence.Signer
	ctl     *mqtttest.Supervisor // watches the agent's status; sends single commands

	cmd     *exec.Cmd     // the running child, nil if none
	exited  chan struct{} // closed when cmd has been waited for
	waitErr error         // cmd.Wait's error, set before exited is closed
	stops   int           // graceful stops so far
}

// childDevice is one sim device of the child's config; extra is appended
// to its settings flow mapping (e.g. ", latency: 5ms").
type childDevice struct {
	id    string
	extra string
}

func newProcEnv(t *testing.T, devs ...childDevice) *procEnv {
	t.Helper()
	dir := t.TempDir()
	e := &procEnv{t: t, dir: dir, dataDir: filepath.Join(dir, "data"), cfgPath: filepath.Join(dir, "agent.yaml"),
		outPath: filepath.Join(dir, "agent.out"), signer: fencetest.MustSigner(t, 1)}
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.broker = b
	t.Cleanup(func() { b.Close() })
	pub := fencetest.WritePublicKey(t, dir, e.signer)
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "agent: {id: gw1, data_dir: %q}\nmqtt: {broker: %q}\ntrust: {keys: [%q]}\nhttp: {listen: \"off\"}\ndevices:\n",
		e.dataDir, b.URL(), pub)
	for _, d := range devs {
		fmt.Fprintf(&cfg, "  - id: %s\n    domain: plant\n    driver: sim\n    settings: {log: %q%s}\n", d.id, e.logPath(d.id), d.extra)
	}
	if err := os.WriteFile(e.cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	e.ctl = mqtttest.NewSupervisor(t, b.URL(), mqtttest.Options{ClientID: "ctl", ReplyTopics: []string{"fencegate/v1/replies/#"}})
	t.Cleanup(e.cleanup)
	return e
}

func (e *procEnv) logPath(device string) string { return filepath.Join(e.dir, device+".log") }

// cleanup kills a child still running and reports what the children
// printed that shows a bug: a panic or a data race.
func (e *procEnv) cleanup() {
	if e.cmd != nil {
		e.kill()
	}
	out, err := os.ReadFile(e.outPath)
	if err != nil {
		return // no child ever started
	}
	for _, p := range childProblems(out) {
		e.t.Errorf("agent child process: %s", p)
	}
	if e.t.Failed() {
		e.t.Logf("agent child output (last 4 KiB):\n%s", tail(out, 4096))
	}
}

// childProblems finds panics and data races in the children's output.
func childProblems(out []byte) []string {
	var probs []string
	s := string(out)
	for _, marker := range []string{"WARNING: DATA RACE", "panic: ", "fatal error: "} {
		if i := strings.Index(s, marker); i >= 0 {
			probs = append(probs, s[i:min(len(s), i+3000)])
		}
	}
	return probs
}

func tail(b []byte, n int) []byte { return b[max(0, len(b)-n):] }

// launch starts the agent child process without waiting for it.
func (e *procEnv) launch() {
	e.t.Helper()
	if e.cmd != nil {
		e.t.Fatal("agent child already running")
	}
	out, err := os.OpenFile(e.outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	defer out.Close() // the child has its own descriptor
	cmd := exec.Command(os.Args[0], "-test.run=^TestAgentChild$", "-test.count=1", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), childConfigEnv+"="+e.cfgPath)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // no orphan if the test binary dies
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		e.waitErr = cmd.Wait()
		close(exited)
	}()
	e.cmd, e.exited = cmd, exited
}

// start launches the agent and waits until it has announced itself online
// (subscribed by then).
func (e *procEnv) start() {
	e.t.Helper()
	online := e.ctl.WatchOnline("gw1")
	e.launch()
	select {
	case <-online:
	case <-e.exited:
		e.cmd = nil
		e.t.Fatalf("agent child exited at start: %v", e.waitErr)
	case <-time.After(30 * time.Second):
		e.t.Fatal("agent child did not come online in 30 s")
	}
}

// kill SIGKILLs the agent and waits for it to be gone.
func (e *procEnv) kill() {
	e.t.Helper()
	_ = e.cmd.Process.Signal(syscall.SIGKILL)
	e.await(10 * time.Second)
}

// stop stops the agent with SIGTERM and checks that it shut down in order.
func (e *procEnv) stop() {
	e.t.Helper()
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	e.await(30 * time.Second)
	e.stops++
	out, _ := os.ReadFile(e.outPath)
	if n := bytes.Count(out, []byte("msg=stopped")); n != e.stops {
		e.t.Fatalf("agent child did not finish a graceful shutdown (%d of %d stops logged), exit: %v", n, e.stops, e.waitErr)
	}
}

func (e *procEnv) await(d time.Duration) {
	e.t.Helper()
	select {
	case <-e.exited:
		e.cmd = nil
	case <-time.After(d):
		e.t.Fatalf("agent child (pid %d) still running %v after a signal", e.cmd.Process.Pid, d)
	}
}

func (e *procEnv) token(seq uint64, holder string) string {
	e.t.Helper()
	tok, err := e.signer.Sign(fenceToken("plant", seq, holder))
	if err != nil {
		e.t.Fatal(err)
	}
	return tok.Raw
}

// simLog reads a device's apply log and checks sim.CheckLog on it.
func (e *procEnv) simLog(device string) []sim.Entry {
	e.t.Helper()
	entries, err := sim.ReadLog(e.logPath(device))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	if err := sim.CheckLog(entries); err != nil {
		e.t.Errorf("device %s apply log: %v", device, err)
	}
	return entries
}

// openStore opens the agent's fence store; the agent must be stopped.
func (e *procEnv) openStore() *persist.Store {
	e.t.Helper()
	st, err := persist.Open(filepath.Join(e.dataDir, "fence.db"), persist.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { st.Close() })
	return st
}

// watchFence returns a channel closed once device's retained state shows
// a fence at seq or above. The agent publishes it when a durable decision
// raised the fence — before the command goes to the device.
func (e *procEnv) watchFence(device string, seq uint64) <-chan struct{} {
	e.t.Helper()
	ch := make(chan struct{})
	var once sync.Once
	topic := protocol.Topics{}.DeviceState(device)
	err := mqtt.Wait(e.ctl.Client().Subscribe(topic, 1, func(_ paho.Client, m paho.Message) {
		var s protocol.DeviceState
		if json.Unmarshal(m.Payload(), &s) == nil && s.Fence != nil && s.Fence.Seq >= seq {
			once.Do(func() { close(ch) })
		}
	}), 10*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { e.ctl.Client().Unsubscribe(topic) })
	return ch
}

func countID(entries []sim.Entry, id string) int {
	n := 0
	for _, en := range entries {
		if en.ID == id {
			n++
		}
	}
	return n
}

// TestRestartStaleStillRejected: B's token 42 was applied, the agent
// process is SIGKILLed and restarted; A's token 41 is still rejected with
// the fence at 42, and B's retry gets its original result.
func TestRestartStaleStillRejected(t *testing.T) {
	e := newProcEnv(t, childDevice{id: "pump1"})
	e.start()
	wantResult(t, e.ctl.Send(t, "pump1", set("a1", e.token(41, "A"), 1)), protocol.StatusApplied, protocol.CodeOK)
	b1 := e.ctl.Send(t, "pump1", set("b1", e.token(42, "B"), 2))
	wantResult(t, b1, protocol.StatusApplied, protocol.CodeOK)
	e.kill()
	e.start()
	r := e.ctl.Send(t, "pump1", set("a2", e.token(41, "A"), 3))
	wantResult(t, r, protocol.StatusRejected, protocol.CodeStaleToken)
	if r.Fence == nil || r.Fence.Seq != 42 || r.Fence.Holder != "B" {
		t.Fatalf("rejection after restart carries fence %+v, want seq 42 of B", r.Fence)
	}
	again := e.ctl.Send(t, "pump1", set("b1", e.token(42, "B"), 2))
	if again.Status != protocol.StatusApplied || !again.Duplicate || !bytes.Equal(again.Output, b1.Output) {
		t.Fatalf("retry of b1 after restart: %+v, first answer %+v", again, b1)
	}
	e.stop()
	entries := e.simLog("pump1")
	if len(entries) != 2 || entries[0].ID != "a1" || entries[1].ID != "b1" {
		t.Fatalf("device applied %+v, want a1 then b1", entries)
	}
}

// TestInDoubtAfterCrashMidApply: the agent is SIGKILLed while the device
// applies a slow command it has durably accepted. After the restart a
// retry is answered in_doubt and not applied — unless the op is declared
// idempotent, when it is applied (once) and answered applied.
func TestInDoubtAfterCrashMidApply(t *testing.T) {
	tests := []struct {
		name       string
		idempotent bool
	}{
		{"not idempotent", false},
		{"idempotent", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newProcEnv(t, childDevice{id: "pump1",
				extra: fmt.Sprintf(", ops: [{name: set}, {name: slow, latency: 2s, idempotent: %t}]", tc.idempotent)})
			e.start()
			cmd := protocol.Command{ID: "slow1", Token: e.token(2, "A"), Op: "slow"}
			fenced := e.watchFence("pump1", 2)
			e.ctl.PublishRaw(t, "pump1", mustJSON(cmd))
			select {
			case <-fenced:
			case <-time.After(15 * time.Second):
				t.Fatal("the agent never raised the fence for slow1")
			}
			e.kill() // the apply takes 2 s: it is under way

			if n := countID(e.simLog("pump1"), "slow1"); n != 0 {
				t.Fatalf("slow1 reached the device before the kill (%d times); the test needs it mid-apply", n)
			}
			e.start()
			first, second := e.ctl.Send(t, "pump1", cmd), e.ctl.Send(t, "pump1", cmd)
			if tc.idempotent {
				wantResult(t, first, protocol.StatusApplied, protocol.CodeOK)
				wantResult(t, second, protocol.StatusApplied, protocol.CodeOK)
				if !second.Duplicate {
					t.Errorf("second retry of an applied command: %+v, want duplicate", second)
				}
			} else {
				for _, r := range []protocol.Result{first, second} {
					wantResult(t, r, protocol.StatusInDoubt, protocol.CodeInDoubt)
					if !r.Duplicate {
						t.Errorf("in_doubt answer %+v, want duplicate", r)
					}
				}
			}
			e.stop()
			wantApplies, wantState := 0, persist.StateInDoubt
			if tc.idempotent {
				wantApplies, wantState = 1, persist.StateDone
			}
			if n := countID(e.simLog("pump1"), "slow1"); n != wantApplies {
				t.Errorf("device applied slow1 %d times, want %d", n, wantApplies)
			}
			rec, ok, err := e.openStore().Lookup("pump1", "slow1")
			if err != nil || !ok || rec.State != wantState {
				t.Errorf("journal holds slow1 as %+v (found %v, %v), want %s", rec, ok, err, wantState)
			}
		})
	}
}

// crashWorld is the shared state of TestCrashLoop's supervisors.
type crashWorld struct {
	e        *procEnv
	devices  []string
	hi       map[string]*atomic.Uint64 // newest seq handed out, per device
	timeouts atomic.Int64              // calls that got no result in time

	inDoubt map[persist.DeviceCommand]bool // found in doubt after some kill

	mu      sync.Mutex // guards the fields below
	tokens  map[uint64]string
	sent    map[string]crashCmd // by command id
	results []protocol.Result   // every result any supervisor received
}

type crashCmd struct {
	device string
	seq    uint64
	cmd    protocol.Command
}

// token returns the token of seq: one lease per seq (holder h<seq>), so
// two supervisors using a seq use the same lease.
func (w *crashWorld) token(seq uint64) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if tok, ok := w.tokens[seq]; ok {
		return tok
	}
	tok, err := w.e.signer.Sign(fenceToken("plant", seq, fmt.Sprintf("h%d", seq)))
	if err != nil {
		panic(err) // a valid token built here; cannot fail
	}
	w.tokens[seq] = tok.Raw
	return tok.Raw
}

func (w *crashWorld) record(r protocol.Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.results = append(w.results, r)
}

// newCommand makes a command for a random device with a token that
// advances the device's newest seq, reuses it, or is stale.
func (w *crashWorld) newCommand(rng *rand.Rand, id string) crashCmd {
	dev := w.devices[rng.IntN(len(w.devices))]
	hi := w.hi[dev]
	var seq uint64
	switch r := rng.IntN(100); {
	case r < 35:
		seq = hi.Add(1)
	case r < 80:
		seq = hi.Load()
	default:
		seq = max(1, hi.Load()-1-uint64(rng.IntN(3)))
	}
	cmd := protocol.Command{ID: id, Token: w.token(seq)}
	switch r := rng.IntN(100); {
	case r < 50:
		cmd.Op, cmd.Args = "set", json.RawMessage(fmt.Sprintf(`{"value":%d}`, rng.IntN(1000)))
	case r < 80:
		cmd.Op = "get"
	default:
		cmd.Op, cmd.Args = "pulse", json.RawMessage(fmt.Sprintf(`{"ms":%d}`, 10+rng.IntN(30)))
	}
	c := crashCmd{device: dev, seq: seq, cmd: cmd}
	w.mu.Lock()
	w.sent[id] = c
	w.mu.Unlock()
	return c
}

// supervise sends commands until ctx is done: new ones, and retries (same
// id, same everything) of its earlier ones — often of the one that just
// got no answer, as a real supervisor would; mostly waiting (boundedly)
// for the result, sometimes not at all. The agent uses a clean session:
// what is sent while it is down is lost, and only a retry gets an answer.
func (w *crashWorld) supervise(ctx context.Context, c *rpcClient, name string, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	var (
		history    []crashCmd
		unanswered *crashCmd // the last command that got no result in time
	)
	for n := 0; ctx.Err() == nil; n++ {
		var cc crashCmd
		switch r := rng.IntN(100); {
		case unanswered != nil && r < 60:
			cc = *unanswered
		case len(history) > 0 && r < 75:
			cc = history[rng.IntN(len(history))]
		default:
			cc = w.newCommand(rng, fmt.Sprintf("%s-%d", name, n))
			history = append(history, cc)
		}
		unanswered = nil
		if rng.IntN(5) == 0 {
			if err := c.send(cc.device, cc.cmd); err != nil {
				return err
			}
			continue
		}
		_, ok, err := c.call(ctx, cc.device, cc.cmd, 500*time.Millisecond)
		if err != nil {
			return err
		}
		if !ok {
			w.timeouts.Add(1)
			unanswered = &cc
		}
	}
	if n := c.bad.Load(); n > 0 {
		return fmt.Errorf("%s: %d undecodable results", name, n)
	}
	return nil
}

// TestCrashLoop SIGKILLs the agent process at random moments while
// concurrent supervisors send commands to two devices, and restarts it.
// At the end (agent stopped): each device's apply log shows no token going
// backwards and no non-idempotent command applied twice; every result a
// supervisor received is backed by the journal (applied → done with the
// same result, in_doubt → in_doubt); every command the device applied is
// in the journal as done (applied) or in_doubt; stale rejections carry a
// newer fence.
func TestCrashLoop(t *testing.T) {
	kills := 300
	if testing.Short() {
		kills = 50
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	e := newProcEnv(t, childDevice{id: "d1", extra: ", latency: 5ms"}, childDevice{id: "d2", extra: ", latency: 5ms"})
	w := &crashWorld{e: e, devices: []string{"d1", "d2"}, hi: map[string]*atomic.Uint64{},
		tokens: map[uint64]string{}, sent: map[string]crashCmd{}, inDoubt: map[persist.DeviceCommand]bool{}}
	for _, d := range w.devices {
		w.hi[d] = new(atomic.Uint64)
		w.hi[d].Store(1)
	}
	e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := range 3 {
		name := fmt.Sprintf("sup%d", i)
		c := newRPCClient(t, e.broker.URL(), name, w.record)
		wg.Go(func() { errs <- w.supervise(ctx, c, name, seed+uint64(i)) })
	}
	for k := range kills {
		if k > 0 {
			if rng.IntN(5) == 0 {
				e.launch() // killed while it may still be opening the store or connecting
			} else {
				e.start()
			}
		}
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		e.kill()
		w.noteInDoubt(t)
	}
	e.start()
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	e.stop()
	time.Sleep(200 * time.Millisecond) // results still on their way to the supervisors
	w.check(t, kills)
}

// noteInDoubt records the commands the killed agent left accepted without
// a result. It opens a copy of the store file, so the next agent run finds
// and marks them itself.
func (w *crashWorld) noteInDoubt(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.e.dataDir, "fence.db"))
	if errors.Is(err, os.ErrNotExist) {
		return // killed before it created the store
	}
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "fence.db")
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := persist.Open(cp, persist.Options{})
	if err != nil {
		t.Fatalf("store left by a killed agent: %v", err)
	}
	for _, c := range st.InDoubtAtOpen() {
		w.inDoubt[c] = true
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// check verifies the end state of TestCrashLoop.
func (w *crashWorld) check(t *testing.T, kills int) {
	t.Helper()
	st := w.e.openStore()
	if d := st.InDoubtAtOpen(); len(d) != 0 {
		t.Errorf("a graceful stop left commands accepted without a result: %v", d)
	}
	fences, err := st.Fences()
	if err != nil {
		t.Fatal(err)
	}
	journal := map[string]map[string]persist.Record{}
	applies := 0
	for _, dev := range w.devices {
		recs, err := st.Journal(dev)
		if err != nil {
			t.Fatal(err)
		}
		journal[dev] = map[string]persist.Record{}
		for _, r := range recs {
			journal[dev][r.ID] = r
		}
		entries := w.e.simLog(dev) // checks sim.CheckLog
		applies += len(entries)
		w.checkApplied(t, dev, entries, journal[dev], fences[dev])
	}
	w.mu.Lock()
	results := append([]protocol.Result(nil), w.results...)
	w.mu.Unlock()
	count := map[protocol.Code]int{}
	for _, r := range results {
		count[r.Code]++
		w.checkResult(t, r, journal[r.Device])
	}
	w.checkInDoubt(t, journal, results)
	t.Logf("%d kills, %d commands in doubt after a kill, %d commands sent, %d calls without a result in time, %d device applies, results by code: %v",
		kills, len(w.inDoubt), len(w.sent), w.timeouts.Load(), applies, count)
	if count[protocol.CodeOK] == 0 {
		t.Error("no supervisor ever received an applied result: the loop tested nothing")
	}
}

// checkInDoubt: a command of a non-idempotent op left in doubt by a kill
// stays in doubt — retries are answered in_doubt, never applied — while
// an idempotent one may have been applied again since.
func (w *crashWorld) checkInDoubt(t *testing.T, journal map[string]map[string]persist.Record, results []protocol.Result) {
	t.Helper()
	for c := range w.inDoubt {
		w.mu.Lock()
		sent := w.sent[c.ID]
		w.mu.Unlock()
		if rec := journal[c.Device][c.ID]; sent.cmd.Op != "get" && rec.State != persist.StateInDoubt {
			t.Errorf("%s (op %s) was in doubt after a kill, the journal now holds it %s", c.ID, sent.cmd.Op, rec.State)
		}
	}
	for _, r := range results {
		if w.inDoubt[persist.DeviceCommand{Device: r.Device, ID: r.ID}] && w.sent[r.ID].cmd.Op != "get" && r.Status != protocol.StatusInDoubt {
			t.Errorf("%s was in doubt after a kill and then answered %s/%s", r.ID, r.Status, r.Code)
		}
	}
}

// checkApplied: every command the device applied is journaled as done
// (with an applied result) or in_doubt, and the stored fence covers it.
func (w *crashWorld) checkApplied(t *testing.T, dev string, entries []sim.Entry, journal map[string]persist.Record, f persist.Fence) {
	t.Helper()
	for _, en := range entries {
		rec, ok := journal[en.ID]
		switch {
		case !ok:
			t.Errorf("device %s applied %s (seq %d) but the journal does not hold it", dev, en.ID, en.Seq)
		case rec.State == persist.StateDone:
			var r protocol.Result
			if err := json.Unmarshal(rec.Result, &r); err != nil || r.Status != protocol.StatusApplied {
				t.Errorf("device %s applied %s but the journal's result is %s (%v)", dev, en.ID, rec.Result, err)
			}
		case rec.State != persist.StateInDoubt:
			t.Errorf("device %s applied %s but the journal holds it %s", dev, en.ID, rec.State)
		}
		if fence.ComparePosition(en.Epoch, en.Seq, f.Token.Epoch, f.Token.Seq) > 0 {
			t.Errorf("device %s applied %s at seq %d above the stored fence %v", dev, en.ID, en.Seq, f.Token)
		}
	}
}

// checkResult: a received result is backed by the journal.
func (w *crashWorld) checkResult(t *testing.T, r protocol.Result, journal map[string]persist.Record) {
	t.Helper()
	w.mu.Lock()
	sent, known := w.sent[r.ID]
	w.mu.Unlock()
	if !known || sent.device != r.Device {
		t.Errorf("result for a command never sent: %+v", r)
		return
	}
	rec, ok := journal[r.ID]
	switch r.Status {
	case protocol.StatusApplied:
		if !ok || rec.State != persist.StateDone {
			t.Errorf("%s was answered applied (duplicate %v) but the journal holds %+v (found %v)", r.ID, r.Duplicate, rec, ok)
			return
		}
		if err := sameResult(r, rec.Result); err != nil {
			t.Errorf("%s: %v", r.ID, err)
		}
	case protocol.StatusInDoubt:
		// in_doubt from the journal, or a driver's in_doubt result; an
		// idempotent op in doubt is re-applied and may be done by now.
		if !ok || (rec.State != persist.StateInDoubt && (rec.State != persist.StateDone ||
			(sameResult(r, rec.Result) != nil && sent.cmd.Op != "get"))) {
			t.Errorf("%s was answered in_doubt but the journal holds %+v (found %v)", r.ID, rec, ok)
		}
	case protocol.StatusRejected:
		if r.Code != protocol.CodeStaleToken {
			t.Errorf("unexpected rejection %+v", r)
		} else if r.Fence == nil || fence.ComparePosition(r.Fence.Epoch, r.Fence.Seq, 1, sent.seq) <= 0 {
			t.Errorf("%s (seq %d) rejected stale_token with fence %+v", r.ID, sent.seq, r.Fence)
		}
	default:
		t.Errorf("unexpected result %+v", r)
	}
}

// sameResult compares a received result with the stored one, ignoring
// the duplicate flag (set on replays).
func sameResult(got protocol.Result, stored []byte) error {
	var want protocol.Result
	if err := json.Unmarshal(stored, &want); err != nil {
		return fmt.Errorf("stored result undecodable: %w", err)
	}
	got.Duplicate, want.Duplicate = false, false
	if g, w := mustJSON(got), mustJSON(want); !bytes.Equal(g, w) {
		return fmt.Errorf("received %s, journal holds %s", g, w)
	}
	return nil
}
