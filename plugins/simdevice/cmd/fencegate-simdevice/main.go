// Command fencegate-simdevice is a driver plugin simulating a device; see
// package plugins/simdevice. The agent starts it (driver: plugin).
package main

import "github.com/fencegate/fencegate/plugins/simdevice"

func main() { simdevice.Main() }
