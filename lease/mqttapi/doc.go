// Package mqttapi serves a lease controller over MQTT protocol v1
// (DESIGN §5): requests on fencegate/v1/leases/{domain}/{op} with a JSON
// payload naming request_id and reply_to, responses published to reply_to,
// and every new grant published retained on fencegate/v1/leases/{domain}/grant.
//
// reply_to must lie in the reply namespace fencegate/v1/replies/ or under a
// configured prefix, and is never a $ or protocol topic (protocol.ReplyRule); a
// request with any other reply_to is logged and not run.
//
// On each connection the server first reads what the broker retains — the
// grants of every known domain and every agent's device state — then
// republishes the newest grants and only then takes requests; it re-reads a
// domain's retained grant before the first grant in it (Floor, the
// controller's lease.EpochFloor). At Start it re-announces every live lease
// the controller lists (LeaseLister).
//
// The paho message callback never blocks: it queues the message and returns.
// A dispatcher runs each request in its own goroutine (bounded), so an
// acquire waiting for a held domain holds up nothing else.
package mqttapi
