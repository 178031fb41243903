package devices

import (
	"context"
	"encoding/json"

	"github.com/fencegate/fencegate/fence"
)

// Driver applies fenced commands to one device.
//
// The rule every driver keeps (part of invariants I2 and I4): **once Apply
// has returned for a command, that command can no longer reach the device**
// — no queue inside the driver, a plugin, the kernel's serial TX buffer or
// an MQTT client's store may deliver it later — **and a command that may
// have reached the device is reported CodeInDoubt, never as a failure.** A
// failure code (device_error, device_timeout, device_unavailable) promises
// the command did not take effect (device_error: the device refused it).
// The agent compares a command with its domain's fence just before Apply;
// anything a driver holds back past its answer would escape that check.
//
// Concurrency: the agent calls Apply from one goroutine per device, one
// command at a time, in the order commands were accepted; Describe and Close
// may be called from other goroutines. Close is called once, after the last
// Apply returned.
type Driver interface {
	// Apply applies one command that the agent has already fenced and made
	// durable. It returns the op's output (a JSON object, or nil) or an error;
	// an error of type *Error says how the command failed (device_error,
	// device_timeout, device_unavailable, unknown_op, stale_token), any other
	// error is reported as device_error. ctx carries the command's deadline:
	// a driver must return soon after ctx is done, and whatever it returns
	// must keep the rule above (in_doubt if bytes may have left).
	Apply(ctx context.Context, cmd Command) (json.RawMessage, error)
	// Describe returns the driver's capabilities. It is cheap and its answer
	// does not change while the driver is open.
	Describe() Capabilities
	// Close releases the device. Apply is not called after Close.
	Close() error
}

// Command is one accepted command as a driver sees it.
type Command struct {
	ID    string          // command id, unique per device within the journal window
	Op    string          // operation name, one of Capabilities.Ops
	Args  json.RawMessage // op arguments: a JSON object, or nil
	Token fence.Token     // the verified token the command carried
}

// Capabilities describe what a driver can do.
type Capabilities struct {
	// Ops maps each supported op name to its properties.
	Ops map[string]Op
	// ChecksTokens is true if the device itself keeps a highest token and
	// refuses stale ones (a second fence at the hardware).
	ChecksTokens bool
}

// Op describes one operation.
type Op struct {
	// Idempotent ops may be applied again when a crash left it unknown
	// whether they reached the device (in doubt); others are answered
	// in_doubt and never re-applied.
	Idempotent bool
}

// Supports reports whether op is one of the driver's ops.
func (c Capabilities) Supports(op string) bool {
	_, ok := c.Ops[op]
	return ok
}

// AvailabilityReporter is implemented by drivers that learn on their own that
// the device went away or came back (an unplugged serial port, an MQTT
// controller's last will, a crashed plugin process). The agent registers one
// handler before the first Apply; the driver calls it from its own goroutine
// on every change. The handler does not block and may be called
// concurrently with Apply.
type AvailabilityReporter interface {
	OnAvailability(handler func(available bool, reason string))
}

// ArgsChecker is implemented by drivers that can tell, without any I/O,
// that Apply would refuse a command's args (a point the device lacks, a
// value out of range). The agent asks before it accepts a command, so such
// a command is answered before it raises the fence or reaches the journal.
// CheckArgs returns nil or an error carrying a Code (bad_request,
// unknown_op); it must be safe to call concurrently with Apply.
type ArgsChecker interface {
	CheckArgs(op string, args json.RawMessage) error
}

// CommandChecker is ArgsChecker with the whole command (id and verified
// token as Apply gets them), for drivers whose refusal depends on more than
// op and args — a frame that must hold the id, domain and holder too. The
// agent asks CheckCommand, when a driver has it, instead of CheckArgs, at
// the same point (before acceptance), with the same contract.
type CommandChecker interface {
	CheckCommand(cmd Command) error
}

// MaxOutputBytes caps the output of one command, for every driver: a larger
// output is dropped and the command reported device_error (the command did
// reach the device; the message says so). Drivers should stay well below it.
const MaxOutputBytes = 64 << 10

// TopicPublisher is implemented by drivers that publish MQTT messages of
// their own (e.g. an MQTT relay writing a controller's command topic). The
// agent never publishes a reply to a topic matching one of these filters, so
// a sender's reply_to cannot drive the device around the fence. The answer
// does not change while the driver is open.
type TopicPublisher interface {
	PublishedTopics() []string
}
