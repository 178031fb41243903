// Package supervisor is the Go SDK for supervisors: programs that take a
// lease on a fencing domain from the controller and command devices through
// the agent, over any MQTT 3.1.1 broker.
//
// The safe path is the easy one:
//
//	c, _ := supervisor.Dial(ctx, supervisor.Config{MQTT: mqtt.Config{Broker: "tcp://gw:1883"}, Holder: "line-a"})
//	l, err := c.Acquire(ctx, "press-7", supervisor.AcquireOptions{TTL: 5 * time.Second})
//	res, err := l.Send(ctx, "press-7", "set", map[string]any{"speed": 40})
//	if errors.Is(err, supervisor.ErrStale) { /* a newer holder took over: stop */ }
//
// A Lease renews itself at about a third of its TTL and closes Done() the
// moment it cannot be sure it still holds the lease (a renewal refused, or
// ValidUntil — the TTL counted from when the last confirmed request was
// sent — passed: a timer armed at ValidUntil); it is never resurrected.
// Send refuses a lost or released lease (ErrLeaseLost), bounds each
// command by deadline_ms = min(ctx deadline, ValidUntil), and retries with
// the same command id until it has a result, ctx ends or the lease is
// lost, so a lost reply never applies a command twice; the agent's answer
// comes back as a Result and, unless applied, an error that errors.Is one
// of this package's sentinels. Replies come to the client's topic in the
// reply namespace, protocol.Topics.ReplyTopic(client id).
//
// The lease does not guard the device: a paused process can wake up after
// its lease expired and send before it notices. The agent's fence rejects
// that command (ErrStale); that is what fencegate is for.
package supervisor
