// Package agent is fencegate's enforcement point on the gateway: it takes
// commands for the devices it owns over MQTT and lets one reach a device only
// after the command's token has been verified, compared with the highest
// token accepted for that device, and that decision fsynced (persist).
//
// Each device has a worker with two stages that keep command order:
//
//	decide: decode → verify token (cached) → check domain and op →
//	        persist.Accept (journal lookup, fence compare, durable accept) →
//	        ack the MQTT message
//	apply:  driver.Apply with a deadline → persist.Complete (durable
//	        result) → publish the result
//
// so command N+1 can be made durable while command N is being applied. Each
// stage's goroutine runs only while its queue holds work (an idle device
// holds none), at most one per stage and device. Lease
// grants announced by the controller raise a device's fence through the same
// decide stage, before the new holder has sent anything.
package agent
