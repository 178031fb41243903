package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/stack"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// demoOptions shape the demo's timeline.
type demoOptions struct {
	ttl     time.Duration // A's and B's lease TTL
	pause   time.Duration // how long A is stopped; must exceed ttl
	devices []string
	keep    string // keep the demo's files here instead of a temporary directory
}

// runDemo runs the one-command demo: an embedded broker, a controller and
// an agent with two simulated devices in this process; supervisor A as a
// child process, which is stopped (SIGSTOP) past its lease; supervisor B,
// which takes over; then A wakes up and its writes are fenced. It checks
// the devices' applied logs for invariant I2 and fails if it was violated.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", stderr)
	o := demoOptions{}
	fs.DurationVar(&o.ttl, "ttl", 1500*time.Millisecond, "lease TTL")
	fs.DurationVar(&o.pause, "pause", 3*time.Second, "how long supervisor A is stopped (more than --ttl)")
	devices := fs.String("devices", "pump1,valve1", "simulated devices")
	fs.StringVar(&o.keep, "keep", "", "keep the demo's data and device logs in this directory")
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	o.devices = strings.Split(*devices, ",")
	if o.pause <= o.ttl {
		return fail(stderr, fmt.Errorf("--pause %v must be longer than --ttl %v", o.pause, o.ttl))
	}
	if err := demo(ctx, o, newNarrator(stdout)); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

func demo(ctx context.Context, o demoOptions, n *narrator) error {
	dir, cleanup, err := demoDir(o.keep)
	if err != nil {
		return err
	}
	defer cleanup()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := stack.Start(sctx, stack.Options{Dir: dir, Devices: o.devices, Latency: 10 * time.Millisecond})
	if err != nil {
		return err
	}
	defer st.Close()
	n.say("stack", "embedded broker at %s, lease controller, agent gw1 with devices %s (domain %s)",
		st.URL(), strings.Join(o.devices, ", "), st.Domain())
	if err := playTimeline(ctx, st, o, n); err != nil {
		return err
	}
	return checkInvariant(st, o.devices, n)
}

func demoDir(keep string) (string, func(), error) {
	if keep != "" {
		return keep, func() {}, os.MkdirAll(keep, 0o700)
	}
	dir, err := os.MkdirTemp("", "fencegate-demo-")
	return dir, func() { os.RemoveAll(dir) }, err
}

// playTimeline: A writes; A is stopped; B takes over; A resumes and is fenced.
func playTimeline(ctx context.Context, st *stack.Stack, o demoOptions, n *narrator) error {
	a, err := startSupervisorA(ctx, st, o)
	if err != nil {
		return err
	}
	defer a.kill()
	if err := a.narrateUntil(n, func(e demoEvent) bool { return e.Event == "result" && e.Applied >= 2*len(o.devices) }); err != nil {
		return err
	}
	n.say("demo", "stopping A with SIGSTOP for %v, as a long GC pause or a frozen VM would; its lease (TTL %v) will expire", o.pause, o.ttl)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	stopped := time.Now()
	if err := takeOver(ctx, st, o, n); err != nil {
		return err
	}
	time.Sleep(time.Until(stopped.Add(o.pause)))
	n.say("demo", "waking A with SIGCONT: it does not know yet that its lease is gone, and keeps writing")
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	return a.narrateToEnd(n)
}

// takeOver is supervisor B: it waits for the domain, sees the agent raise
// the fence, then writes.
func takeOver(ctx context.Context, st *stack.Stack, o demoOptions, n *narrator) error {
	b, err := supervisor.Dial(ctx, supervisor.Config{MQTT: mqtt.Config{Broker: st.URL(), ClientID: "demo-B"}, Holder: "B"})
	if err != nil {
		return err
	}
	defer b.Close()
	n.say("B", "asking for the lease on %s, willing to wait", st.Domain())
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l, err := b.Acquire(actx, st.Domain(), supervisor.AcquireOptions{TTL: o.ttl, Wait: 20 * time.Second})
	if err != nil {
		return err
	}
	n.say("B", "granted: token %s — strictly newer than A's", short(l.Fence()))
	for _, d := range o.devices {
		if err := l.WaitHandover(actx, d); err != nil {
			return err
		}
		n.say("agent", "%s fenced at B's token %s — before B sent anything (the grant was announced)", d, short(l.Fence()))
	}
	for i := 1; i <= 2; i++ {
		for _, d := range o.devices {
			res, err := l.Send(actx, d, "set", map[string]any{"value": 100 + i})
			n.say("B", "set %s value=%d → %s", d, 100+i, outcome(res, err))
		}
	}
	return l.Release(actx)
}

// checkInvariant reads the devices' applied logs: tokens never went
// backwards (I2), and no write of A was applied after B's first.
func checkInvariant(st *stack.Stack, devices []string, n *narrator) error {
	n.say("demo", "checking what the devices actually applied (their own logs)")
	var violations []error
	for _, d := range devices {
		entries, err := sim.ReadLog(st.DeviceLog(d))
		if err != nil {
			return err
		}
		summary, err := checkDeviceLog(entries)
		n.say("check", "%s: %s", d, summary)
		if err != nil {
			violations = append(violations, fmt.Errorf("%s: %w", d, err))
		}
	}
	if len(violations) > 0 {
		n.say("check", "INVARIANT I2 VIOLATED")
		return errors.Join(violations...)
	}
	n.say("check", "invariant I2 holds: once B's token was accepted, no command with A's older token reached a device")
	return nil
}

func checkDeviceLog(entries []sim.Entry) (string, error) {
	counts := map[string]int{}
	var newest sim.Entry
	var bad error
	for i, e := range entries {
		counts[e.Holder]++
		if i > 0 && fence.ComparePosition(e.Epoch, e.Seq, newest.Epoch, newest.Seq) < 0 {
			bad = fmt.Errorf("command %s with token %d.%d applied after %d.%d", e.ID, e.Epoch, e.Seq, newest.Epoch, newest.Seq)
		}
		if i == 0 || fence.ComparePosition(e.Epoch, e.Seq, newest.Epoch, newest.Seq) > 0 {
			newest = e
		}
	}
	if err := sim.CheckLog(entries); err != nil && bad == nil {
		bad = err
	}
	return fmt.Sprintf("%d applied (A: %d, B: %d), tokens never went backwards: %v", len(entries), counts["A"], counts["B"], bad == nil), bad
}

func outcome(res protocol.Result, err error) string {
	switch {
	case res.ID == "" && err != nil:
		return "error: " + err.Error()
	case res.Status == protocol.StatusApplied:
		return "applied"
	case res.Code == protocol.CodeStaleToken && res.Fence != nil:
		return fmt.Sprintf("%s %s: the device is fenced at %d.%d/%s", strings.ToUpper(string(res.Status)), res.Code,
			res.Fence.Epoch, res.Fence.Seq, res.Fence.Holder)
	}
	return fmt.Sprintf("%s %s: %s", strings.ToUpper(string(res.Status)), res.Code, res.Message)
}

func short(t fence.Token) string { return fmt.Sprintf("%d.%d/%s", t.Epoch, t.Seq, t.Holder) }

// narrator prints the timeline with the time since the demo started.
type narrator struct {
	mu    sync.Mutex // serializes lines
	w     io.Writer
	start time.Time
}

func newNarrator(w io.Writer) *narrator { return &narrator{w: w, start: time.Now()} }

func (n *narrator) say(who, format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.w, "[%6.2fs] %-6s %s\n", time.Since(n.start).Seconds(), who, fmt.Sprintf(format, args...))
}

// demoEvent is one line supervisor A prints for the narrator.
type demoEvent struct {
	Event   string           `json:"event"` // acquired, result, lost, done, error
	Device  string           `json:"device,omitempty"`
	Value   int              `json:"value,omitempty"`
	Token   string           `json:"token,omitempty"`
	Result  *protocol.Result `json:"result,omitempty"`
	Error   string           `json:"error,omitempty"`
	Applied int              `json:"applied,omitempty"` // A's applied writes so far
}

// childA is supervisor A running as a child process.
type childA struct {
	cmd    *exec.Cmd
	events chan demoEvent
	exited chan error
}

func startSupervisorA(ctx context.Context, st *stack.Stack, o demoOptions) (*childA, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, demoSupervisorCmd, "--broker", st.URL(), "--domain", st.Domain(),
		"--devices", strings.Join(o.devices, ","), "--ttl", o.ttl.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &childA{cmd: cmd, events: make(chan demoEvent, 64), exited: make(chan error, 1)}
	go a.read(out)
	return a, nil
}

func (a *childA) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var e demoEvent
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			a.events <- e
		}
	}
	close(a.events)
	a.exited <- a.cmd.Wait()
}

// narrateUntil narrates A's events until stop says so.
func (a *childA) narrateUntil(n *narrator, stop func(demoEvent) bool) error {
	for {
		select {
		case e, ok := <-a.events:
			if !ok {
				return errors.New("supervisor A exited early")
			}
			narrateA(n, e)
			if e.Event == "error" {
				return errors.New("supervisor A: " + e.Error)
			}
			if stop(e) {
				return nil
			}
		case <-time.After(30 * time.Second):
			return errors.New("supervisor A made no progress in 30 s")
		}
	}
}

// narrateToEnd narrates A's events until it exits.
func (a *childA) narrateToEnd(n *narrator) error {
	err := a.narrateUntil(n, func(e demoEvent) bool { return e.Event == "done" })
	if err != nil {
		return err
	}
	select {
	case err := <-a.exited:
		return err
	case <-time.After(10 * time.Second):
		return errors.New("supervisor A did not exit")
	}
}

func (a *childA) kill() {
	_ = a.cmd.Process.Signal(syscall.SIGCONT)
	_ = a.cmd.Process.Kill()
}

func narrateA(n *narrator, e demoEvent) {
	switch e.Event {
	case "acquired":
		if t, err := fence.ParseUnverified(e.Token); err == nil {
			n.say("A", "granted the lease: token %s", short(t))
		}
	case "result":
		n.say("A", "set %s value=%d → %s", e.Device, e.Value, outcome(derefResult(e.Result), errorOf(e.Error)))
	case "lost":
		n.say("A", "its SDK now reports the lease lost: %s", e.Error)
	case "done":
		n.say("A", "every device refused it; A stops")
	}
}

func derefResult(r *protocol.Result) protocol.Result {
	if r == nil {
		return protocol.Result{}
	}
	return *r
}

func errorOf(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}
