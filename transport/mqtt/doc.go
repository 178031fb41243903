// Package mqtt holds MQTT connection handling for every fencegate
// component: client options built from a documented Config
// (paho.mqtt.golang), Dial for a client that subscribes again on every
// (re)connection and returns once the first subscriptions are in place,
// waiting on a token, and an embedded broker (mochi-mqtt) for one-box
// setups and tests.
//
// It knows nothing of protocol v1's messages or topics (package protocol)
// and decides nothing about fencing; the agent, the controller and the
// supervisor SDK choose their own session, acknowledgement and Will
// settings on top of the options it returns. It imports no other fencegate
// package.
package mqtt
