package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/chaos/netproxy"
	"github.com/fencegate/fencegate/fence"
)

// install is the running installation of one schedule: its processes and
// the proxies between each process and the broker.
type install struct {
	plan    Plan
	dir     string
	self    string // this binary, which every role runs
	mosq    string // the mosquitto binary, for --broker mosquitto
	etcdBin string // the etcd binary, for --store etcd

	brokerAddr  string
	broker      *proc
	controllers []*proc // one with bbolt; two replicas with etcd
	agents      []*proc
	firmware    map[string]*proc           // by device id
	sups        map[string]*proc           // by supervisor name
	proxies     map[string]*netproxy.Proxy // by process name: its link to the broker
	etcd        *etcdCluster
}

// path is a file of the schedule's directory.
func (in *install) path(name string) string { return filepath.Join(in.dir, name) }

// role returns a proc running role of this binary with args.
func (in *install) role(name, role string, args ...string) *proc {
	return &proc{name: name, path: in.self, args: args, env: []string{RoleEnv + "=" + role},
		logPath: in.path(name + ".log")}
}

// freePort returns a loopback address no one listens on now, below the
// kernel's ephemeral range (32768–60999 on Linux), so that no connection
// or ":0" listener takes it between now and a restart of the process that
// binds it (the broker and etcd members bind the same port again).
func freePort() (string, error) {
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		return addr, nil
	}
	return "", errors.New("chaos: no free port in 20000-31999")
}

// link returns the broker URL process name uses: its own proxy.
func (in *install) link(name string) (string, error) {
	p, err := netproxy.Listen("127.0.0.1:0", in.brokerAddr)
	if err != nil {
		return "", err
	}
	in.proxies[name] = p
	return "tcp://" + p.Addr(), nil
}

// start brings the installation up: broker, controller, firmware, agents;
// supervisors come later (startSupervisors).
func (in *install) start(ctx context.Context) error {
	in.proxies = map[string]*netproxy.Proxy{}
	in.firmware = map[string]*proc{}
	in.sups = map[string]*proc{}
	if _, err := fence.WriteKeyFiles(in.path("controller.key"), in.path("controller.pub"), true); err != nil {
		return err
	}
	steps := []func(context.Context) error{in.startBroker, in.startStore, in.startControllers, in.startFirmware, in.startAgents}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (in *install) startBroker(ctx context.Context) error {
	addr, err := freePort()
	if err != nil {
		return err
	}
	in.brokerAddr = addr
	if in.plan.Options["broker"] == "mosquitto" {
		in.broker, err = in.mosquitto(addr)
		if err != nil {
			return err
		}
		return in.broker.start(ctx)
	}
	in.broker = in.role("broker", "broker", addr)
	in.broker.ready, in.broker.supervise = true, true
	return in.broker.start(ctx)
}

// mosquitto returns a proc of a real Mosquitto listening on addr.
func (in *install) mosquitto(addr string) (*proc, error) {
	_, port, _ := net.SplitHostPort(addr)
	conf := fmt.Sprintf("listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nmax_packet_size 1048576\nlog_dest stderr\n", port)
	path := in.path("mosquitto.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return &proc{name: "broker", path: in.mosq, args: []string{"-c", path}, logPath: in.path("broker.log"), supervise: true}, nil
}

func (in *install) startStore(ctx context.Context) error {
	if in.plan.Options["store"] != "etcd" {
		return nil
	}
	var err error
	in.etcd, err = startEtcd(ctx, in)
	return err
}

// controllerConfig is controller name's YAML config.
func (in *install) controllerConfig(name, broker string) map[string]any {
	mq := map[string]any{"broker": broker, "client_id": "fencechaos-" + name, "keep_alive": "2s",
		"connect_timeout": "2s", "max_reconnect_interval": "1s"}
	cfg := map[string]any{"key": in.path("controller.key"), "mqtt": mq, "log_level": "info"}
	if in.etcd != nil {
		cfg["store"] = "etcd"
		cfg["etcd"] = in.etcd.clientConfig()
	} else {
		cfg["data_dir"] = in.path(name + "-data")
	}
	return cfg
}

// startControllers starts the plan's controllers: "controller" on bbolt,
// or the replicas "controller1", "controller2" on etcd.
func (in *install) startControllers(ctx context.Context) error {
	for _, name := range in.plan.controllerNames() {
		broker, err := in.link(name)
		if err != nil {
			return err
		}
		path := in.path(name + ".yaml")
		if err := writeYAML(path, in.controllerConfig(name, broker)); err != nil {
			return err
		}
		p := in.role(name, "controller", path)
		p.supervise = true
		if err := p.start(ctx); err != nil {
			return err
		}
		in.controllers = append(in.controllers, p)
	}
	return nil
}

func (in *install) startFirmware(ctx context.Context) error {
	for _, d := range in.plan.Domains {
		for _, dev := range d.Devices {
			if dev.Kind != DeviceFirmware {
				continue
			}
			p := in.role(dev.ID, "firmware", "--protocol", "frame", "--link", in.path(dev.ID+".pty"),
				"--state", in.path(dev.ID+".fence"), "--log", in.path(dev.ID+".applies"), "--device", dev.ID)
			p.ready, p.stdin = true, true
			if err := p.start(ctx); err != nil {
				return err
			}
			in.firmware[dev.ID] = p
		}
	}
	return nil
}

func (in *install) startAgents(ctx context.Context) error {
	for i := range in.plan.Agents {
		name := fmt.Sprintf("agent%d", i+1)
		broker, err := in.link(name)
		if err != nil {
			return err
		}
		path := in.path(name + ".yaml")
		if err := writeYAML(path, in.agentConfig(i, name, broker)); err != nil {
			return err
		}
		p := in.role(name, "agent", path)
		p.supervise = true
		if err := p.start(ctx); err != nil {
			return err
		}
		in.agents = append(in.agents, p)
	}
	return nil
}

// agentConfig is agent i's YAML config: the devices of its domains.
func (in *install) agentConfig(i int, name, broker string) map[string]any {
	var devs []map[string]any
	for _, d := range in.plan.Domains {
		if d.Agent != i {
			continue
		}
		for _, dev := range d.Devices {
			devs = append(devs, map[string]any{"id": dev.ID, "domain": d.Name, "driver": driverOf(dev.Kind),
				"timeout": "5s", "settings": in.deviceSettings(dev)})
		}
	}
	return map[string]any{
		"agent": map[string]any{"id": name, "data_dir": in.path(name + "-data")},
		"mqtt": map[string]any{"broker": broker, "client_id": "fencechaos-" + name, "keep_alive": "2s",
			"connect_timeout": "2s", "max_reconnect_interval": "1s"},
		"trust":   map[string]any{"keys": []string{in.path("controller.pub")}},
		"limits":  map[string]any{"queue": in.plan.Queue},
		"devices": devs,
		"http":    map[string]any{"listen": "off"},
	}
}

func driverOf(kind string) string {
	switch kind {
	case DeviceFirmware:
		return "frame"
	case DevicePlugin:
		return "plugin"
	}
	return "sim"
}

// deviceSettings are a device's driver settings.
func (in *install) deviceSettings(dev DevicePlan) map[string]any {
	sim := map[string]any{"latency": dev.Latency.String(), "log": in.path(dev.ID + ".applies"), "no_fence": true}
	switch dev.Kind {
	case DeviceFirmware:
		return map[string]any{"port": map[string]any{"path": in.path(dev.ID + ".pty"), "reopen_min": "100ms", "reopen_max": "500ms"}}
	case DevicePlugin:
		return map[string]any{"path": in.self, "restart_backoff": "100ms", "restart_backoff_max": "1s",
			"config": map[string]any{"device": sim, "pid_file": in.path(dev.ID + ".pid")}}
	}
	if dev.TimeoutEvery > 0 {
		sim["timeout_every"] = dev.TimeoutEvery
	}
	return sim
}

// startSupervisors starts every supervisor of the plan, each told to stop at until.
func (in *install) startSupervisors(ctx context.Context, until time.Time) error {
	planPath := in.path("plan.json")
	for _, s := range in.plan.Supervisors {
		broker, err := in.link(s.Name)
		if err != nil {
			return err
		}
		p := in.role(s.Name, "supervisor", "--plan", planPath, "--name", s.Name, "--broker", broker,
			"--history", in.path(s.Name+".history"), "--until", fmt.Sprint(until.UnixNano()))
		p.ready = true
		if err := p.start(ctx); err != nil {
			return err
		}
		in.sups[s.Name] = p
	}
	return nil
}

// unexpectedExits are the exits of processes the harness did not cause
// (supervised ones were restarted, as systemd would).
func (in *install) unexpectedExits() []string {
	var all []*proc
	all = append(all, in.broker)
	all = append(all, in.controllers...)
	all = append(all, in.agents...)
	for _, p := range in.firmware {
		all = append(all, p)
	}
	for _, p := range in.sups {
		all = append(all, p)
	}
	if in.etcd != nil {
		for _, m := range in.etcd.members {
			all = append(all, m.proc)
		}
	}
	var exits []string
	for _, p := range all {
		if p != nil {
			exits = append(exits, p.unexpectedExits()...)
		}
	}
	return exits
}

// dumpGoroutines has every Go process of the installation print its
// goroutines into its log (SIGQUIT; the process then exits), to see why
// progress stalled.
func (in *install) dumpGoroutines() {
	procs := append(slices.Clone(in.controllers), in.agents...)
	if in.plan.Options["broker"] != "mosquitto" {
		_ = in.broker.signal(syscall.SIGUSR1) // its sessions and subscriptions first
		time.Sleep(300 * time.Millisecond)
		procs = append(procs, in.broker)
	}
	for _, p := range procs {
		p.markDown()
		_ = p.signal(syscall.SIGQUIT)
	}
	for _, p := range procs {
		p.wait(5 * time.Second)
	}
}

// stopAll ends every process: supervisors first, then agents, firmware,
// controller, store and broker; and closes the proxies.
func (in *install) stopAll() {
	for _, p := range in.sups {
		p.stop(10 * time.Second)
	}
	for _, p := range in.agents {
		p.stop(10 * time.Second)
	}
	for _, p := range in.firmware {
		p.stop(5 * time.Second)
	}
	for _, p := range in.controllers {
		p.stop(10 * time.Second)
	}
	if in.etcd != nil {
		in.etcd.stop()
	}
	if in.broker != nil {
		in.broker.stop(5 * time.Second)
	}
	for _, p := range in.proxies {
		_ = p.Close()
	}
}

func writeYAML(path string, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
