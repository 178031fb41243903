// Package devices declares what the agent needs from a device driver — the
// Driver interface, the command a driver receives, its capabilities and its
// typed errors — and a registry of driver factories by name.
//
// Drivers live in sub-packages (devices/sim, and later serial, MQTT relay and
// plugin drivers). The agent owns each driver through one worker goroutine,
// so a driver never sees two commands at once.
package devices
