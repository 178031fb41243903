// Package frame is the driver for token-aware firmware speaking the
// fencegate firmware protocol v1 over a serial port (docs/firmware-protocol.md):
// COBS frames with a CRC-32C, each request carrying the command id, the
// token's domain, epoch, seq and holder, the op and its JSON args. The
// firmware keeps its own highest token and answers a stale one with "stale"
// and that token, which this driver returns as a stale_token
// *devices.Error: a second fence at the hardware that holds even if the
// agent's store was lost. It registers itself as driver "frame".
//
// Request and Reply are the protocol's messages, shared with the reference
// firmware simulator (hwtest/cmd/simfirmware).
package frame
