// Package modbus is the driver for Modbus devices — PLCs, VFDs, I/O
// modules, meters — over RTU (a serial line, through transport/serial:
// exclusive port, unplug and reopen with backoff) or TCP. It registers
// itself as driver "modbus".
//
// A device's settings name its points (a register or coil, a type, a word
// order, a scale and an offset, writable or not); commands read and write
// points by name (ops read and write; raw_read and raw_write by address
// if enabled). Modbus has no conditional write, so the agent's fence holds
// only while the agent owns the only path to the device: the exclusive
// serial port for RTU, a network where only the gateway reaches the PLC
// for TCP. Where the PLC program can cooperate, a block of fence
// registers carries every write command's token position, which the PLC
// compares with the highest it has seen and refuses if older — a second
// fence at the device that holds even if the agent's store was lost
// (docs/modbus.md has the layout and a reference IEC 61131-3 routine).
//
// The Modbus PDUs and both framings are implemented here, not through
// github.com/simonvetter/modbus (the test servers use that library's):
// its client opens serial ports itself, so it cannot run over
// transport/serial's exclusive, reopening port, and it dials its own TCP
// sockets, with no context, no word on whether a request left before a
// failure, and no way to reset a connection so that a request still in
// the kernel's send queue is discarded instead of delivered late.
package modbus
