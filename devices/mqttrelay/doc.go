// Package mqttrelay is the driver for device controllers that are
// themselves MQTT clients (Tasmota-style relays, PLC bridges). It registers
// as driver "mqttrelay".
//
// Per op, a command topic and a payload template filled from the command's
// args (Tasmota: cmnd/plug1/POWER ← ON), and an optional confirmation: a
// state or result topic and a value (the whole payload or one JSON field)
// that must equal a template or match a pattern within a timeout, else
// in_doubt (the broker took the command). Confirmation matches; it does not
// take the next message: unrelated telemetry on the same topic is skipped,
// and so are retained messages (a broker's replay of an old status).
//
// Once Apply has answered, the command is never published again: commands
// are never retained (Validate refuses retain: true), and every broker
// session is a fresh clean one that the relay itself reconnects, so paho
// never resends a publish the relay gave up on. A command that may have
// left without an acknowledgement or confirmation is in_doubt.
//
// Availability follows the controller's LWT topic (tele/plug1/LWT
// Online/Offline): while it is offline, commands fail device_unavailable
// without being published, and the agent is told (AvailabilityReporter).
//
// The fence holds only if the agent is the sole publisher on the
// controllers' command topics (invariant I7): see deploy/mosquitto and
// docs/mqttrelay.md for broker ACLs.
package mqttrelay
