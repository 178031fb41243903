// Package simdevice is a driver plugin that simulates a device: devices/sim
// (configurable ops, latency, failure injection, its own token check and an
// apply log tests read with sim.ReadLog) served through plugins.Serve.
//
// The binary is cmd/fencegate-simdevice. Tests that need it as a real child
// process re-execute their own test binary: their TestMain calls Main when
// plugins.IsPlugin reports that an agent started them.
//
// Its config (the device's settings.config) is Config:
//
//	config:
//	  device: {latency: 20ms, log: /var/tmp/pump1.log, fence_file: /var/tmp/pump1.fence}
//	  pid_file: /run/fencegate/pump1-plugin.pid
package simdevice
