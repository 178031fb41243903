package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/fencegate/fencegate/agent"
)

// reloadOnHangup re-reads the config file on every SIGHUP until ctx ends
// and applies its trust.keys to a (ReloadTrust: additions first, removal
// at once). Other changes — devices, broker, limits — need a restart and
// are only reported. It returns when ctx ends; the caller waits for it.
func reloadOnHangup(ctx context.Context, a *agent.Agent, configPath string, running agent.Config, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			reload(a, configPath, running, log)
		}
	}
}

// reload applies one SIGHUP; every outcome is logged.
func reload(a *agent.Agent, configPath string, running agent.Config, log *slog.Logger) {
	cfg, err := agent.LoadConfig(configPath)
	if err != nil {
		log.Error("reload refused: config does not load; nothing changed", "err", err)
		return
	}
	added, removed, err := a.ReloadTrust(cfg.Trust.Keys)
	if err != nil {
		log.Error("reload refused: trust keys; nothing changed", "err", err)
		return
	}
	log.Info("trusted keys reloaded", "added", added, "removed", removed, "trusted", a.TrustedKeys())
	if !sameDevices(cfg.Devices, running.Devices) {
		log.Warn("device list changed in the config file: restart the agent to apply it (reload changes only trust.keys)")
	}
}

// sameDevices compares the device ids, domains and drivers of two lists.
func sameDevices(a, b []agent.DeviceConfig) bool {
	return slices.EqualFunc(a, b, func(x, y agent.DeviceConfig) bool {
		return x.ID == y.ID && x.Domain == y.Domain && x.Driver == y.Driver && x.Timeout == y.Timeout
	})
}
