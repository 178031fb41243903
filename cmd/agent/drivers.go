package main

// The drivers this agent binary can open, by their registered names. Each
// import registers its driver from an init function.
import (
	_ "github.com/fencegate/fencegate/devices/frame"     // "frame": serial firmware protocol v1 (token-aware)
	_ "github.com/fencegate/fencegate/devices/line"      // "line": serial ASCII request/response
	_ "github.com/fencegate/fencegate/devices/modbus"    // "modbus": Modbus RTU and TCP devices
	_ "github.com/fencegate/fencegate/devices/mqttrelay" // "mqttrelay": MQTT-attached controllers
	_ "github.com/fencegate/fencegate/devices/sim"       // "sim": simulated token-aware device
	_ "github.com/fencegate/fencegate/plugins"           // "plugin": driver plugin processes
)
