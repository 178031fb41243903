package simmodbus_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/agent"
	_ "github.com/fencegate/fencegate/devices/modbus"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fence/fencetest"
	"github.com/fencegate/fencegate/hwtest/simmodbus"
	"github.com/fencegate/fencegate/internal/logtest"
	"github.com/fencegate/fencegate/internal/mqtttest"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// Real targets; empty means the simulated PLC. Their register map is the
// reference map of hwtest/README.md.
var (
	rtuPort     = flag.String("hwtest.modbus-port", "", "serial port of a real Modbus RTU device or PLC with the reference map")
	rtuBaud     = flag.Int("hwtest.modbus-baud", 19200, "baud rate of -hwtest.modbus-port")
	rtuParity   = flag.String("hwtest.modbus-parity", "even", "parity of -hwtest.modbus-port")
	rtuUnit     = flag.Int("hwtest.modbus-unit", 1, "unit address of the real RTU device")
	tcpAddr     = flag.String("hwtest.modbus-tcp", "", "host:port of a real Modbus TCP device or PLC with the reference map")
	tcpUnit     = flag.Int("hwtest.modbus-tcp-unit", 1, "unit id of the real TCP device")
	fenceStatus = flag.String("hwtest.modbus-fence", "", "PLC fence of the real targets: exception or status (default: rtu status, tcp exception)")
)

// Device ids, domains and timeouts of the suite's agent.
const (
	rtuDev, rtuDomain = "plc-rtu", "line-a"
	tcpDev, tcpDomain = "plc-tcp", "line-b"
	applyTimeout      = 3 * time.Second
	fenceAddr         = 1000
)

// target is one device under test: a simulated PLC, or a real one (plc nil).
type target struct {
	dev, domain string
	plc         *simmodbus.PLC
	rtu         *simmodbus.RTUServer // simulated RTU only
	path        string               // rtu: the port; tcp: host:port
	layout      string
	status      bool // the PLC answers the fence in a status register
}

// needSim skips a scenario that needs fault injection on a real target.
func (tg target) needSim(t *testing.T) *simmodbus.PLC {
	t.Helper()
	if tg.plc == nil {
		t.Skipf("%s is real hardware: this scenario needs the simulator's fault injection", tg.dev)
	}
	return tg.plc
}

// suite runs one agent in-process with an RTU and a TCP Modbus device,
// against an embedded broker; a supervisor client talks to it over MQTT.
type suite struct {
	t        *testing.T
	dir      string
	signer   *fence.Signer
	broker   *mqtt.Embedded
	cfg      agent.Config
	rec      *logtest.Recorder
	cancel   context.CancelFunc
	done     chan error
	sup      *mqtttest.Supervisor
	rtu, tcp target
	seq      map[string]uint64
}

func newSuite(t *testing.T) *suite {
	t.Helper()
	s := &suite{t: t, dir: t.TempDir(), rec: logtest.New(), seq: map[string]uint64{}}
	s.rtu = s.rtuTarget()
	s.tcp = s.tcpTarget()
	s.signer = fencetest.MustSigner(t, 9)
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.broker = b
	t.Cleanup(func() { b.Close() })
	s.cfg = s.agentConfig()
	s.sup = mqtttest.NewSupervisor(t, b.URL(), mqtttest.Options{ClientID: "modbus-sup", Timeout: 20 * time.Second})
	return s
}

func (s *suite) rtuTarget() target {
	tg := target{dev: rtuDev, domain: rtuDomain, path: *rtuPort, layout: "seq", status: *fenceStatus != "exception"}
	if tg.path != "" {
		return tg
	}
	tg.plc = s.plc(tg)
	srv, err := simmodbus.ServeRTU(tg.plc, filepath.Join(s.dir, "plc-rtu"))
	if err != nil {
		s.t.Skipf("pseudo-terminals unavailable: %v", err)
	}
	s.t.Cleanup(func() { srv.Close() })
	tg.rtu, tg.path = srv, filepath.Join(s.dir, "plc-rtu")
	return tg
}

func (s *suite) tcpTarget() target {
	tg := target{dev: tcpDev, domain: tcpDomain, path: *tcpAddr, layout: "epoch_seq", status: *fenceStatus == "status"}
	if tg.path != "" {
		return tg
	}
	tg.plc = s.plc(tg)
	srv, err := simmodbus.ServeTCP(tg.plc, "127.0.0.1:0")
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { srv.Close() })
	tg.path = srv.Addr()
	return tg
}

// plc is a simulated PLC with the reference map's fence for tg.
func (s *suite) plc(tg target) *simmodbus.PLC {
	words := map[string]int{"seq": 4, "epoch_seq": 8}[tg.layout]
	p, err := simmodbus.NewPLC(simmodbus.Config{Fence: &simmodbus.Fence{Address: fenceAddr, Words: words, Status: tg.status},
		StateFile: filepath.Join(s.dir, tg.dev+".fence")})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(p.Close) // after the servers' cleanups
	return p
}

// referencePoints is the reference map (hwtest/README.md).
const referencePoints = `
points:
  u16:    {table: holding, address: 0, writable: true}
  i16:    {table: holding, address: 1, type: int16, writable: true}
  u32:    {table: holding, address: 2, type: uint32, writable: true}
  u32lo:  {table: holding, address: 4, type: uint32, word_order: low_first, writable: true}
  i32:    {table: holding, address: 6, type: int32, writable: true}
  i32lo:  {table: holding, address: 8, type: int32, word_order: low_first, writable: true}
  f32:    {table: holding, address: 10, type: float32, writable: true}
  f32lo:  {table: holding, address: 12, type: float32, word_order: low_first, writable: true}
  speed:  {table: holding, address: 14, scale: 0.1, writable: true}
  run:    {table: coil, address: 0, writable: true}
  dir:    {table: coil, address: 1, writable: true}
  missing: {table: holding, address: 9999, type: uint32}
`

func (s *suite) agentConfig() agent.Config {
	pub := fencetest.WritePublicKey(s.t, s.dir, s.signer)
	rtu := fmt.Sprintf("transport: rtu\nunit: %d\nport: {path: %s, baud: %d, parity: %s, read_timeout: 20ms, reopen_min: 20ms, reopen_max: 200ms}\n"+
		"request_timeout: 400ms\nquiet: 300ms\n%s%s", *rtuUnit, s.rtu.path, *rtuBaud, *rtuParity, fenceYAML(s.rtu), referencePoints)
	tcp := fmt.Sprintf("transport: tcp\nunit: %d\ntcp: {address: %q, reconnect_min: 20ms, reconnect_max: 200ms}\nrequest_timeout: 400ms\n%s%s",
		*tcpUnit, s.tcp.path, fenceYAML(s.tcp), referencePoints)
	return agent.Config{
		Agent: agent.AgentConfig{ID: "modbus-gw", DataDir: filepath.Join(s.dir, "data")},
		MQTT:  agent.MQTTConfig{Broker: s.broker.URL()}, Trust: agent.TrustConfig{Keys: []string{pub}},
		HTTP: agent.HTTPConfig{Listen: "off"},
		Devices: []agent.DeviceConfig{
			{ID: rtuDev, Domain: rtuDomain, Driver: "modbus", Timeout: applyTimeout, Settings: node(s.t, rtu)},
			{ID: tcpDev, Domain: tcpDomain, Driver: "modbus", Timeout: applyTimeout, Settings: node(s.t, tcp)},
		},
	}.WithDefaults()
}

func fenceYAML(tg target) string {
	f := fmt.Sprintf("fence_registers: {address: %d, layout: %s", fenceAddr, tg.layout)
	if tg.status {
		f += fmt.Sprintf(", status: %d", fenceAddr+map[string]int{"seq": 4, "epoch_seq": 8}[tg.layout])
	}
	return f + "}\n"
}

func node(t *testing.T, doc string) yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		t.Fatalf("%v in\n%s", err, doc)
	}
	return *n.Content[0]
}

// start runs the agent and waits until it announces itself online.
func (s *suite) start() {
	s.t.Helper()
	online := s.sup.WatchOnline("modbus-gw")
	a, err := agent.New(s.cfg, slog.New(s.rec))
	if err != nil {
		s.t.Fatalf("agent.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() { s.done <- a.Run(ctx) }()
	select {
	case <-online:
	case <-time.After(15 * time.Second):
		s.t.Fatal("agent did not come online")
	}
}

// stop stops the agent and checks Run's result.
func (s *suite) stop() {
	s.t.Helper()
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	if err := <-s.done; err != nil {
		s.t.Errorf("agent Run: %v", err)
	}
}

// next returns a seq above every one used so far in domain.
func (s *suite) next(domain string) uint64 {
	s.seq[domain] += 10
	return s.seq[domain] + 100
}

// send commands tg with a fresh token and returns the result.
func (s *suite) send(t *testing.T, tg target, id, op, args string) protocol.Result {
	t.Helper()
	return s.sendAt(t, tg, id, op, args, 1, s.next(tg.domain))
}

// sendAt commands tg with a token at (epoch, seq).
func (s *suite) sendAt(t *testing.T, tg target, id, op, args string, epoch, seq uint64) protocol.Result {
	t.Helper()
	tok, err := s.signer.Sign(fence.Token{Domain: tg.domain, Epoch: epoch, Seq: seq, Holder: "sup", IssuedAt: time.Now().UnixMilli(), TTLms: 60000})
	if err != nil {
		t.Fatal(err)
	}
	c := protocol.Command{ID: id, Token: tok.Raw, Op: op}
	if args != "" {
		c.Args = json.RawMessage(args)
	}
	return s.sup.Send(t, tg.dev, c)
}

// expect fails t unless r has status and code.
func expect(t *testing.T, r protocol.Result, status protocol.Status, code protocol.Code) {
	t.Helper()
	if r.Status != status || r.Code != code {
		t.Fatalf("result %s: %s/%s (%s), want %s/%s", r.ID, r.Status, r.Code, r.Message, status, code)
	}
}
