package main

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/plugins"
)

// TestMain serves the lamp when the test below starts this binary as a
// plugin.
func TestMain(m *testing.M) {
	if plugins.IsPlugin() {
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

// TestLampAsChildProcess drives the example through a real plugin process.
func TestLampAsChildProcess(t *testing.T) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("initial: 40"), &n); err != nil {
		t.Fatal(err)
	}
	h, err := plugins.Open("lamp1", plugins.Config{Path: os.Args[0], Config: *n.Content[0]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	tok := fence.Token{Domain: "d", Epoch: 1, Seq: 1, Holder: "h", TTLms: 1}
	tests := []struct {
		name, op, args, want string
		timeout              time.Duration // 0: a minute
		code                 devices.Code
	}{
		{name: "initial level from config", op: "read", want: `{"level":40}`},
		{name: "dim", op: "dim", args: `{"level":7}`, want: `{"level":7}`},
		{name: "read after dim", op: "read", want: `{"level":7}`},
		{name: "out of range", op: "dim", args: `{"level":700}`, code: devices.CodeDeviceError},
		{name: "fade", op: "fade", args: `{"level":10}`, want: `{"level":10}`},
		{name: "fade cut by the deadline", op: "fade", args: `{"level":100}`, timeout: 500 * time.Millisecond, code: devices.CodeInDoubt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(tc.timeout, time.Minute))
			defer cancel()
			out, err := h.Apply(ctx, devices.Command{ID: tc.name, Op: tc.op, Args: json.RawMessage(tc.args), Token: tok})
			if tc.code != "" {
				if devices.CodeOf(err) != tc.code {
					t.Fatalf("err = %v, want %s", err, tc.code)
				}
				return
			}
			if err != nil || string(out) != tc.want {
				t.Fatalf("%s = %s, %v; want %s", tc.op, out, err, tc.want)
			}
		})
	}
}
