// Package e2e holds the end-to-end tests of the reference MQTT device of
// firmware/c/examples/mqtt-device: the C program built from source, a real
// Mosquitto, the real lease controller (lease/server) and supervisors using
// the Go SDK — first with no agent in the path, where the device's own fence
// is all that stops a stale holder, then with the agent in front (the device
// behind the mqttrelay driver), where both fences must agree.
//
// The tests skip, naming the Debian package, without gcc, pkg-config,
// libsodium-dev, libmosquitto-dev or mosquitto. The package has no code
// besides its tests.
package e2e
