// Package mqtttest is a test supervisor for fencegate's MQTT interface: a
// real paho client that publishes commands to devices' command topics and
// collects what the agent answers — results by command id, device states
// by device, agent status by agent.
//
// It is for tests only (it takes a testing.TB and fails the test on a
// timeout) but is an ordinary package so that the tests of several
// packages (agent, hwtest, plugins/simdevice) can share it.
//
// Concurrency: paho callbacks never block. Every message is handed to a
// buffered channel; a result that finds its channel full fails the test,
// a state that finds its channel full is dropped. Every wait is bounded by
// Options.Timeout (results, states) or 10 s (broker acknowledgements) and
// ends the test with t.Fatalf when it runs out.
package mqtttest
