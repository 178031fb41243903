// Package mqttapi serves a lease controller over MQTT protocol v1
// (DESIGN §5): requests on fencegate/v1/leases/{domain}/{op} with a JSON
// payload naming request_id and reply_to, responses published to reply_to,
// and every new grant published retained on fencegate/v1/leases/{domain}/grant.
//
// The paho message callback never blocks: it queues the message and returns.
// A dispatcher runs each request in its own goroutine (bounded), so an
// acquire waiting for a held domain holds up nothing else.
package mqttapi
