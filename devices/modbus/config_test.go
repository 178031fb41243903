package modbus

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/devices"
)

func yamlNode(t *testing.T, doc string) *yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		t.Fatal(err)
	}
	return n.Content[0]
}

const tcpHead = "transport: tcp\ntcp: {address: 127.0.0.1:1}\n"

// TestFactoryErrorsNameKeys: every invalid setting is refused at open,
// naming its key as it stands in the agent's config file.
func TestFactoryErrorsNameKeys(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"no transport", "points: {a: {table: holding, address: 1}}", "devices[0].settings.transport"},
		{"rtu without a port", "transport: rtu\npoints: {a: {table: holding, address: 1}}", "devices[0].settings.port.path"},
		{"tcp without an address", "transport: tcp\npoints: {a: {table: holding, address: 1}}", "devices[0].settings.tcp.address"},
		{"port given to tcp", tcpHead + "port: {path: /dev/null}\npoints: {a: {table: holding, address: 1}}", "devices[0].settings.port"},
		{"rtu unit 0", "transport: rtu\nunit: 0\nport: {path: /x}\npoints: {a: {table: holding, address: 1}}", "devices[0].settings.unit"},
		{"no points", tcpHead, "devices[0].settings.points"},
		{"unknown point key", tcpHead + "points: {speed: {table: holding, adress: 1}}", "speed.adress: unknown key"},
		{"unknown table", tcpHead + "points: {speed: {table: register, address: 1}}", "devices[0].settings.points.speed.table"},
		{"missing address", tcpHead + "points: {speed: {table: holding}}", "devices[0].settings.points.speed.address"},
		{"address out of range", tcpHead + "points: {speed: {table: holding, address: 65536}}", "devices[0].settings.points.speed.address"},
		{"32 bits past the end", tcpHead + "points: {speed: {table: holding, address: 65535, type: uint32}}", "devices[0].settings.points.speed.address"},
		{"unknown type", tcpHead + "points: {speed: {table: holding, address: 1, type: int64}}", "devices[0].settings.points.speed.type"},
		{"typed coil", tcpHead + "points: {run: {table: coil, address: 1, type: uint16}}", "devices[0].settings.points.run.type"},
		{"writable input", tcpHead + "points: {t: {table: input, address: 1, writable: true}}", "devices[0].settings.points.t.writable"},
		{"word order on 16 bits", tcpHead + "points: {s: {table: holding, address: 1, word_order: low_first}}", "devices[0].settings.points.s.word_order"},
		{"bad word order", tcpHead + "points: {s: {table: holding, address: 1, type: uint32, word_order: middle}}", "devices[0].settings.points.s.word_order"},
		{"zero scale", tcpHead + "points: {s: {table: holding, address: 1, scale: 0}}", "devices[0].settings.points.s.scale"},
		{"bad point name", tcpHead + "points: {'a b': {table: holding, address: 1}}", "devices[0].settings.points.a b"},
		{"fence without address", tcpHead + "points: {a: {table: holding, address: 1}}\nfence_registers: {layout: seq}", "devices[0].settings.fence_registers.address"},
		{"fence layout", tcpHead + "points: {a: {table: holding, address: 1}}\nfence_registers: {address: 10, layout: hash}", "devices[0].settings.fence_registers.layout"},
		{"status not after the block", tcpHead + "points: {a: {table: holding, address: 1}}\nfence_registers: {address: 10, status: 20}", "devices[0].settings.fence_registers.status"},
		{"writable point over the fence", tcpHead + "points: {a: {table: holding, address: 12, writable: true}}\nfence_registers: {address: 10}", "devices[0].settings.points.a.address"},
		{"max_registers", tcpHead + "max_registers: 200\npoints: {a: {table: holding, address: 1}}", "devices[0].settings.max_registers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := devices.Open("modbus", "plc", devices.Settings{Node: yamlNode(t, tt.doc), Path: "devices[0].settings"}, nil)
			if err == nil {
				d.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}

// TestDefaults: the Modbus serial defaults (19200 8E1; 2 stop bits
// without parity) and the spec's request limits.
func TestDefaults(t *testing.T) {
	one := 1
	base := Config{Transport: RTU, Points: Points{"a": {Table: "holding", Address: &one}}}
	tests := []struct {
		name     string
		parity   string
		stopBits string
	}{
		{"even by default", "", "1"},
		{"none takes two stop bits", "none", "2"},
		{"odd keeps one", "odd", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			c.Port.Path, c.Port.Parity = "/dev/null", tt.parity
			s, err := compile(c)
			if err != nil {
				t.Fatal(err)
			}
			if s.Port.Baud != 19200 || s.Port.StopBits != tt.stopBits || s.maxRead != 125 || s.maxRegs != 123 || s.unit != 1 {
				t.Fatalf("port %+v, limits %d/%d, unit %d", s.Port, s.maxRead, s.maxRegs, s.unit)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	one := 1
	s, err := compile(Config{Transport: TCP, TCP: TCPConfig{Address: "plc"}, RawOps: true,
		Points: Points{"a": {Table: "holding", Address: &one}}, Fence: &FenceConfig{Address: &one}})
	if err != nil {
		t.Fatal(err)
	}
	if s.TCP.Address != "plc:502" {
		t.Fatalf("address %q, want the Modbus port added", s.TCP.Address)
	}
	c := capabilities(s)
	if !c.ChecksTokens || !c.Ops[OpRead].Idempotent || c.Ops[OpWrite].Idempotent || !c.Ops[OpRawRead].Idempotent || len(c.Ops) != 4 {
		t.Fatalf("capabilities %+v", c)
	}
}
