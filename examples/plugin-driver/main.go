// Command plugin-driver is a complete third-party driver plugin: a dimmable
// lamp kept in memory. Build it, then point a device at it:
//
//	devices:
//	  - id: lamp1
//	    driver: plugin
//	    settings:
//	      path: /usr/local/lib/fencegate/plugin-driver
//	      config: {initial: 40}
package main

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/plugins"
)

type lamp struct {
	mu    sync.Mutex // guards level
	level int
}

func (l *lamp) Describe() devices.Capabilities {
	return devices.Capabilities{Ops: map[string]devices.Op{"dim": {}, "read": {Idempotent: true}}}
}

func (l *lamp) Apply(ctx context.Context, cmd devices.Command) (json.RawMessage, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cmd.Op == "dim" {
		var args struct{ Level *int }
		if json.Unmarshal(cmd.Args, &args) != nil || args.Level == nil || *args.Level < 0 || *args.Level > 100 {
			return nil, devices.Errorf(devices.CodeDeviceError, "dim: args.level must be 0..100")
		}
		l.level = *args.Level
	}
	return json.Marshal(map[string]int{"level": l.level})
}

func (l *lamp) Close() error { return nil }

func main() {
	var cfg struct {
		Initial int `yaml:"initial"`
	}
	if err := plugins.DecodeConfig(&cfg); err != nil {
		plugins.Logger().Error("bad config", "err", err)
		return
	}
	plugins.Serve(&lamp{level: cfg.Initial})
}
