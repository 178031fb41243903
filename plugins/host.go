package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/fencegate/fencegate/devices"
)

func init() {
	devices.Register("plugin", factory)
	devices.RegisterCheck("plugin", devices.DecodeCheck(func() any { return new(Config) }))
}

// factory opens a plugin device from its agent-config settings.
func factory(device string, s devices.Settings, log *slog.Logger) (devices.Driver, error) {
	var cfg Config
	if err := s.DecodeValid(&cfg); err != nil {
		return nil, err
	}
	return Open(device, cfg, log)
}

// Host drives one device through a plugin process: it implements
// devices.Driver and devices.AvailabilityReporter for the agent, with the
// concurrency contract documented there. In addition Apply is safe to call
// concurrently (but sends one command at a time: a call while another is
// in the plugin fails at once, see Apply), and Describe, PID and Close at
// any time.
//
// A supervisor goroutine, owned by Host and stopped by Close, pings the
// plugin every PingInterval and restarts it with backoff after it is lost.
type Host struct {
	device string
	cfg    Config // defaults applied
	log    *slog.Logger
	launch func(context.Context) (*instance, error) // nil: cannot restart (attached)
	caps   devices.Capabilities                     // from the first start; read-only after

	mu        sync.Mutex // guards the fields below
	cur       *instance  // the running plugin; nil while down or closed
	handler   func(available bool, reason string)
	available bool // as last reported to handler
	closed    bool

	busy  chan struct{} // one token: held while an Apply is in the plugin
	spawn *spawner      // starts plugin processes; nil when attached
	stop  chan struct{} // closed by Close
	done  chan struct{} // closed when the supervisor has returned
}

var (
	_ devices.Driver               = (*Host)(nil)
	_ devices.AvailabilityReporter = (*Host)(nil)
)

// Open starts the plugin binary of cfg for device and returns once it has
// answered Describe (within cfg.StartTimeout). log receives the plugin's
// stderr and the host's own events; it may be nil.
func Open(device string, cfg Config, log *slog.Logger) (*Host, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate("settings"); err != nil {
		return nil, err
	}
	text, err := cfg.configText()
	if err != nil {
		return nil, err
	}
	h := newHost(device, cfg, log)
	h.spawn = newSpawner()
	h.launch = func(ctx context.Context) (inst *instance, err error) {
		h.spawn.do(func() { inst, err = startProcess(ctx, device, cfg, text, h.log) })
		return inst, err
	}
	if _, err := h.begin(); err != nil {
		h.spawn.stop()
		return nil, err
	}
	return h, nil
}

// Attach connects to a plugin that is already running (go-plugin's reattach
// mode; see ServeTest) and drives device through it. An attached plugin is
// not restarted: once lost, the device stays unavailable; nor killed: a
// test-mode plugin only loses its connection. Only cfg's intervals and
// OverrunGrace are used.
func Attach(device string, rc *plugin.ReattachConfig, cfg Config, log *slog.Logger) (*Host, error) {
	h := newHost(device, cfg.WithDefaults(), log)
	h.launch = func(ctx context.Context) (*instance, error) { return attach(ctx, rc) }
	h, err := h.begin()
	if h != nil {
		h.launch = nil
	}
	return h, err
}

func newHost(device string, cfg Config, log *slog.Logger) *Host {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Host{device: device, cfg: cfg, log: log, available: true, busy: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
}

// begin makes the first start and starts the supervisor.
func (h *Host) begin() (*Host, error) {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.StartTimeout)
	defer cancel()
	inst, err := h.launch(ctx)
	if err != nil {
		return nil, fmt.Errorf("plugins: device %s: start: %w", h.device, err)
	}
	h.caps = inst.drv.Describe()
	h.cur = inst
	go h.supervise(inst)
	return h, nil
}

// Apply sends cmd to the plugin and returns its answer; it never leaves
// cmd behind in the plugin. It sends nothing, failing device_unavailable,
// while the plugin is down (wrapping ErrNotRunning) or while another Apply
// is still in the plugin (wrapping ErrBusy), and fails device_timeout if
// ctx is done already. The plugin gets ctx's deadline and Config's
// OverrunGrace after it to answer; if it does not, or if it is lost during
// the call, Apply kills it (SIGKILL, waiting for it to exit), has it
// restarted, and fails in_doubt wrapping ErrOverrun or ErrPluginLost.
func (h *Host) Apply(ctx context.Context, cmd devices.Command) (json.RawMessage, error) {
	select {
	case h.busy <- struct{}{}:
		defer func() { <-h.busy }()
	default:
		return nil, &devices.Error{Code: devices.CodeDeviceUnavailable,
			Message: "an earlier command is still in the plugin; this one was not sent", Err: ErrBusy}
	}
	inst := h.current()
	if inst == nil {
		return nil, &devices.Error{Code: devices.CodeDeviceUnavailable,
			Message: "plugin for device " + h.device + " is not running", Err: ErrNotRunning}
	}
	if ctx.Err() != nil {
		return nil, &devices.Error{Code: devices.CodeDeviceTimeout,
			Message: "deadline passed before the command was sent to the plugin", Err: context.Cause(ctx)}
	}
	if inst.exited() {
		// Died since the last ping (killed from outside): the command is
		// not sent, so it is not in doubt.
		err := fmt.Errorf("%w: the plugin process exited", ErrPluginLost)
		h.lose(inst, err)
		return nil, &devices.Error{Code: devices.CodeDeviceUnavailable,
			Message: "plugin for device " + h.device + " exited; the command was not sent", Err: err}
	}
	out, err := inst.drv.apply(ctx, cmd, h.cfg.OverrunGrace)
	if errors.Is(err, ErrPluginLost) || errors.Is(err, ErrOverrun) {
		h.lose(inst, err)
	}
	return out, err
}

// lose takes inst out of service after a failed call, so later applies
// fail device_unavailable at once, kills its process and waits until it
// has exited, and wakes the supervisor, which reports the device
// unavailable and restarts the plugin. Reports come only from the
// supervisor, so a late lose of an old instance cannot mark a restarted
// plugin unavailable.
func (h *Host) lose(inst *instance, err error) {
	h.mu.Lock()
	if h.cur == inst {
		h.cur = nil
	}
	h.mu.Unlock()
	inst.kill()
	inst.markLost(err.Error())
}

// exited reports whether inst's process is known to have exited (false
// for a plugin attached in-process, which has no process of its own).
func (inst *instance) exited() bool { return inst.client != nil && inst.client.Exited() }

func (h *Host) current() *instance {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur
}

// Describe returns the capabilities the plugin described at its first
// start; the caller may modify the returned map.
func (h *Host) Describe() devices.Capabilities {
	c := h.caps
	c.Ops = maps.Clone(h.caps.Ops)
	return c
}

// OnAvailability registers handler, called from the supervisor goroutine
// on every change, never concurrently with itself: false when the plugin
// is lost or reports its device unavailable, true when it is back.
func (h *Host) OnAvailability(handler func(available bool, reason string)) {
	h.mu.Lock()
	h.handler = handler
	h.mu.Unlock()
}

// PID is the running plugin process's id, 0 while down, closed or attached
// in-process.
func (h *Host) PID() int {
	inst := h.current()
	if inst == nil {
		return 0
	}
	if rc := inst.client.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// Close stops the supervisor and the plugin (gracefully, then killed after
// go-plugin's grace period), then the thread that started it. Later
// applies fail device_unavailable. Safe to call more than once.
func (h *Host) Close() error {
	h.mu.Lock()
	already := h.closed
	h.closed = true
	h.mu.Unlock()
	if !already {
		close(h.stop)
	}
	<-h.done
	if h.spawn != nil && !already {
		h.spawn.stop()
	}
	return nil
}

// report records availability and calls the handler if it changed.
func (h *Host) report(available bool, reason string) {
	h.mu.Lock()
	changed := h.available != available
	h.available = available
	fn := h.handler
	h.mu.Unlock()
	if changed && fn != nil {
		fn(available, reason)
	}
}

// instance is one started plugin process (or attached plugin).
type instance struct {
	client  *plugin.Client
	proto   plugin.ClientProtocol
	drv     *grpcClient
	started time.Time

	lostOnce sync.Once
	lost     chan struct{} // closed by markLost
	why      string        // set before lost is closed

	endOnce sync.Once // ends the process, by stop or kill
}

func (i *instance) markLost(why string) {
	i.lostOnce.Do(func() {
		i.why = why
		close(i.lost)
	})
}

// stop ends inst gracefully: a started process is shut down (killed after
// go-plugin's grace period); an attached test-mode plugin only loses its
// connection (its server stops with its ServeTest context: go-plugin races
// when both a Shutdown call and the context stop it). Only for a plugin
// with no command in it: a graceful stop lets a running Apply finish.
func (i *instance) stop() { i.endOnce.Do(func() { i.end(false) }) }

// kill ends inst at once: a started process gets SIGKILL, and kill returns
// once it has exited, so nothing it was running can still act. Concurrent
// calls of stop and kill wait for the first.
func (i *instance) kill() { i.endOnce.Do(func() { i.end(true) }) }

func (i *instance) end(now bool) {
	rc := i.client.ReattachConfig()
	if rc != nil && rc.Test {
		if c, ok := i.proto.(*plugin.GRPCClient); ok {
			_ = c.Conn.Close()
		}
		return
	}
	if now && rc != nil && rc.Pid > 0 {
		if p, err := os.FindProcess(rc.Pid); err == nil {
			_ = p.Kill()
		}
	}
	i.client.Kill()
}
