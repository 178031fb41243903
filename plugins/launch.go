package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
)

// Environment variables the host sets for a plugin process.
const (
	// EnvConfig holds the device's plugin config as YAML text (settings
	// "config"); see DecodeConfig.
	EnvConfig = "FENCEGATE_PLUGIN_CONFIG"
	// EnvDevice holds the device id; see Device.
	EnvDevice = "FENCEGATE_DEVICE"
)

// startProcess starts cfg's binary as a plugin for device and connects to it.
func startProcess(ctx context.Context, device string, cfg Config, configText string, log *slog.Logger) (*instance, error) {
	cmd := exec.Command(cfg.Path, cfg.Args...)
	cmd.Env = []string{EnvConfig + "=" + configText, EnvDevice + "=" + device}
	dieWithHost(cmd)
	cc := clientConfig()
	cc.Cmd = cmd
	cc.StartTimeout = cfg.StartTimeout
	cc.AutoMTLS = true
	cc.Stderr = &stderrLog{log: log.With("plugin", filepath.Base(cfg.Path))}
	if cfg.SHA256 != "" {
		sum, _ := hex.DecodeString(cfg.SHA256) // checked by Validate
		cc.SecureConfig = &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	inst, err := connect(ctx, plugin.NewClient(cc))
	if errors.Is(err, plugin.ErrChecksumsDoNotMatch) {
		return nil, fmt.Errorf("%w: %s", ErrChecksum, cfg.Path)
	}
	return inst, err
}

// attach connects to a plugin already serving at rc.
func attach(ctx context.Context, rc *plugin.ReattachConfig) (*instance, error) {
	cc := clientConfig()
	cc.Reattach = rc
	cc.Plugins = hostSets()[ProtocolVersion] // go-plugin negotiates no version when reattaching
	return connect(ctx, plugin.NewClient(cc))
}

// clientConfig is what every host connection shares. go-plugin's own
// logger is off: the plugin's stderr goes to Stderr, and the host logs the
// events that matter (lost, restarted) itself.
func clientConfig() *plugin.ClientConfig {
	return &plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: hostSets(),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Level: hclog.Off, Output: io.Discard}),
	}
}

// connect starts (or attaches) client, dispenses the driver and describes
// it; on error the client is killed.
func connect(ctx context.Context, client *plugin.Client) (_ *instance, err error) {
	defer func() {
		if err != nil {
			client.Kill()
		}
	}()
	proto, err := client.Client()
	if err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	raw, err := proto.Dispense(PluginName)
	if err != nil {
		return nil, fmt.Errorf("dispense: %w", err)
	}
	drv, ok := raw.(*grpcClient)
	if !ok {
		return nil, fmt.Errorf("dispense: plugin %q is a %T", PluginName, raw)
	}
	if err := drv.describe(ctx); err != nil {
		return nil, err
	}
	return &instance{client: client, proto: proto, drv: drv, started: time.Now(), lost: make(chan struct{})}, nil
}
