// Package mqtt holds what every fencegate component needs to speak MQTT
// protocol v1: the topic names (docs/protocol.md), client options built from
// a documented Config (paho.mqtt.golang), and an embedded broker
// (mochi-mqtt) for one-box setups and tests.
//
// It decides nothing about fencing; the agent, the controller and the
// supervisor SDK choose their own session, acknowledgement and Will settings
// on top of the options it returns.
package mqtt
