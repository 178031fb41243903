package plugins

import (
	"github.com/hashicorp/go-plugin"

	"github.com/fencegate/fencegate/devices"
)

// ProtocolVersion is the driver plugin protocol version this package speaks
// (internal/driverpb/driver.proto). Host and plugin negotiate the highest
// version both have in their plugin sets.
const ProtocolVersion = 1

// PluginName is the name of the driver plugin in the plugin sets.
const PluginName = "driver"

// Handshake is shared by the agent and every driver plugin. It is not a
// security measure: it keeps a plugin binary started by hand from waiting
// for an agent that never comes, and an agent from talking to a binary that
// is not a fencegate driver.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "FENCEGATE_DRIVER_PLUGIN",
	MagicCookieValue: "5b0f3c2e-fencegate-driver",
}

// hostSets are the plugin sets the host can speak, by protocol version.
func hostSets() map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{ProtocolVersion: {PluginName: &driverPlugin{}}}
}

// serverSets are the plugin sets a plugin serving impl speaks, dropping
// outputs over maxOutput bytes.
func serverSets(impl devices.Driver, maxOutput int) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{ProtocolVersion: {PluginName: &driverPlugin{impl: impl, maxOutput: maxOutput}}}
}
