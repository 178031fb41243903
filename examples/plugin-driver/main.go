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
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/plugins"
)

type lamp struct {
	mu    sync.Mutex // guards level
	level int
}

func (l *lamp) Describe() devices.Capabilities {
	return devices.Capabilities{Ops: map[string]devices.Op{"dim": {}, "fade": {}, "read": {Idempotent: true}}}
}

func (l *lamp) Apply(ctx context.Context, cmd devices.Command) (json.RawMessage, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var args struct{ Level *int }
	if cmd.Op != "read" && (json.Unmarshal(cmd.Args, &args) != nil || args.Level == nil || *args.Level < 0 || *args.Level > 100) {
		return nil, devices.Errorf(devices.CodeDeviceError, "%s: args.level must be 0..100", cmd.Op)
	}
	switch cmd.Op {
	case "dim":
		l.level = *args.Level
	case "fade":
		if err := l.fade(ctx, *args.Level); err != nil {
			return nil, err
		}
	}
	return json.Marshal(map[string]int{"level": l.level})
}

// fade moves the level one step per 10 ms, honouring ctx: stopped before
// the first step the command did nothing (device_timeout); stopped later
// it did part of its work (in_doubt).
func (l *lamp) fade(ctx context.Context, to int) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for moved := false; l.level != to; moved = true {
		select {
		case <-ctx.Done():
			if moved {
				return devices.Errorf(devices.CodeInDoubt, "fade stopped at level %d by the deadline", l.level)
			}
			return devices.Errorf(devices.CodeDeviceTimeout, "fade not started before the deadline")
		case <-t.C:
		}
		l.level += min(max(to-l.level, -1), 1)
	}
	return nil
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
