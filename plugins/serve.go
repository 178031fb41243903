package plugins

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/internal/yamlcfg"
)

// Serve serves d as a driver plugin to the agent that started this process
// and returns once the agent is done with it, after closing d. Call it from
// a plugin's main; started by hand (without the agent's handshake), it
// prints a message and exits the process with status 1.
//
// The agent calls d's methods with the devices.Driver contract: Apply one at
// a time, with the agent's deadline in ctx. Serve starts no Apply whose
// deadline has passed and queues none behind a running one (see
// grpcServer). If d implements devices.AvailabilityReporter, its reports
// reach the agent through pings.
//
// If the agent dies (even by SIGKILL) the process exits, within about
// 100 ms, without closing d: Serve watches its parent process (see
// watchParent), besides the Pdeathsig the agent sets on Linux.
func Serve(d devices.Driver) {
	stop := watchParent(os.Getppid(), parentPoll, parentGone)
	defer stop()
	serveDriver(d, devices.MaxOutputBytes)
}

// serveDriver serves d with go-plugin until the host is done, then closes
// d. Outputs over maxOutput bytes are dropped.
func serveDriver(d devices.Driver, maxOutput int) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: serverSets(d, maxOutput),
		GRPCServer:       plugin.DefaultGRPCServer,
	})
	_ = d.Close()
}

// ServeTest serves d in-process, in go-plugin's test mode, until ctx is
// done; Attach connects a Host to the returned config. The returned channel
// is closed once serving has stopped (d is not closed). For tests of
// plugins: everything but the process boundary is real.
func ServeTest(ctx context.Context, d devices.Driver) (*plugin.ReattachConfig, <-chan struct{}, error) {
	rcCh := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	go plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: serverSets(d, devices.MaxOutputBytes),
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger:           hclog.NewNullLogger(),
		Test:             &plugin.ServeTestConfig{Context: ctx, ReattachConfigCh: rcCh, CloseCh: closed},
	})
	select {
	case rc := <-rcCh:
		return rc, closed, nil
	case <-closed:
		return nil, closed, fmt.Errorf("plugins: test server stopped before serving")
	}
}

// IsPlugin reports whether this process was started by an agent as a
// driver plugin (the handshake cookie is in its environment). Test binaries
// that re-execute themselves as plugins check it first thing in TestMain.
func IsPlugin() bool {
	return os.Getenv(Handshake.MagicCookieKey) == Handshake.MagicCookieValue
}

// Device is the id of the device this plugin drives, "" outside the agent.
func Device() string { return os.Getenv(EnvDevice) }

// DecodeConfig decodes the device's plugin config (the agent config's
// settings.config, as YAML) into out, a pointer to a struct with yaml tags.
// Unknown keys and wrong types are errors naming the key and the value; an
// absent config leaves out unchanged.
func DecodeConfig(out any) error {
	if err := yamlcfg.Decode([]byte(os.Getenv(EnvConfig)), out); err != nil {
		return fmt.Errorf("plugin config: %w", err)
	}
	return nil
}

// Logger returns a logger for plugin code. Its records reach the agent's
// log with their level and attributes, tagged with the device id.
func Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: hclogKeys}))
}

// hclogKeys renames slog's JSON keys to hclog's, which go-plugin and the
// agent's stderr forwarding understand, and drops the time (the agent logs
// its own).
func hclogKeys(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.TimeKey:
		return slog.Attr{}
	case slog.LevelKey:
		return slog.String("@level", strings.ToLower(a.Value.String()))
	case slog.MessageKey:
		return slog.String("@message", a.Value.String())
	}
	return a
}
