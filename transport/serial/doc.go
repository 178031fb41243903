// Package serial owns serial ports for device drivers: it opens a port
// exclusively (an advisory flock on the device node first, then TIOCEXCL,
// read back, and a check that no other process has the node open), sets its
// mode from a Config, reads with a timeout without spinning, writes with a
// deadline (reporting how many bytes the kernel took, and discarding the
// unsent rest on a timeout), discards unsent output on request (DropOutput)
// so that a request a driver gave up on cannot reach the device later,
// notices an unplugged port and reopens it with backoff.
//
// It also provides the two framings the serial drivers speak: text lines
// ended by a terminator (LineDecoder) and COBS frames protected by a CRC-32C
// (EncodeFrame, FrameDecoder). A Link ties a port and a decoder together:
// one reader goroutine per Link decodes what arrives into messages, and
// reports garbage as messages with an error rather than failing.
//
// Ports are opened through go.bug.st/serial (mode, raw termios, reads);
// writes go through a second, non-blocking descriptor on the same node (the
// one that holds the flock) so that they can honour a deadline, which
// go.bug.st/serial's blocking Write cannot.
package serial
