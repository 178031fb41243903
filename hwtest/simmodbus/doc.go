// Package simmodbus is a simulated Modbus device — a PLC with the four
// data tables, the reference PLC-side fence of docs/modbus.md and fault
// injection — for the tests of devices/modbus and the hwtest conformance
// suite. It serves Modbus TCP through github.com/simonvetter/modbus's
// server, and Modbus RTU on a pseudo-terminal (or a real serial port)
// with devices/modbus's RTU frame reader, both calling the same tables.
//
// The fence runs in one of two modes, as a real PLC would: the Modbus
// server refuses a write carrying a stale fence with an exception and
// applies none of it (exception mode), or the PLC program judges the fence
// in its scan cycle and answers in a status register (status mode), as
// the reference IEC 61131-3 routine does.
//
// The command hwtest/cmd/simmodbus runs it (see Run and hwtest/README.md):
//
//	simmodbus --link /tmp/plc0 --fence 1000 [--fence-status] [--state /tmp/plc0.state]
//	simmodbus --tcp 127.0.0.1:1502 --fence 1000
package simmodbus
