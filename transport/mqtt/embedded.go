package mqtt

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// Embedded is an in-process MQTT broker (mochi-mqtt) listening on one TCP
// address. It allows every client: bind it to loopback, or put a broker with
// ACLs in front of it (docs show the ACLs a shared broker needs).
type Embedded struct {
	srv  *mochi.Server
	addr net.Addr
}

// DefaultMaxPacket is the embedded broker's largest packet, in bytes: a
// client sending a larger one is disconnected by the broker, so no payload
// of unbounded size ever reaches a subscriber's queue.
const DefaultMaxPacket = 1 << 20

// StartEmbedded starts a broker listening on addr ("127.0.0.1:0" picks a free
// port; URL tells which), with packets up to DefaultMaxPacket. log may be nil
// (a discarding logger is used).
func StartEmbedded(addr string, log *slog.Logger) (*Embedded, error) {
	return StartEmbeddedLimit(addr, log, DefaultMaxPacket)
}

// StartEmbeddedLimit is StartEmbedded with packets up to maxPacket bytes
// (0 means DefaultMaxPacket).
func StartEmbeddedLimit(addr string, log *slog.Logger, maxPacket uint32) (*Embedded, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("embedded broker: listen %s: %w", addr, err)
	}
	if maxPacket == 0 {
		maxPacket = DefaultMaxPacket
	}
	caps := mochi.NewDefaultServerCapabilities()
	caps.MaximumPacketSize = maxPacket
	srv := mochi.New(&mochi.Options{Logger: brokerLog(log), InlineClient: true, Capabilities: caps})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		ln.Close()
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	if err := srv.AddListener(listeners.NewNet("fencegate", ln)); err != nil {
		ln.Close()
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	if err := srv.Serve(); err != nil {
		srv.Close()
		return nil, fmt.Errorf("embedded broker: serve: %w", err)
	}
	return &Embedded{srv: srv, addr: ln.Addr()}, nil
}

// URL is the broker's address for clients, "tcp://host:port".
func (e *Embedded) URL() string { return "tcp://" + e.addr.String() }

// Addr is the address the broker listens on.
func (e *Embedded) Addr() string { return e.addr.String() }

// Server exposes the mochi server, e.g. for inline publishing in tests.
func (e *Embedded) Server() *mochi.Server { return e.srv }

// Close disconnects every client and stops the broker.
func (e *Embedded) Close() error {
	if err := e.srv.Close(); err != nil {
		return fmt.Errorf("embedded broker: close: %w", err)
	}
	return nil
}

// DescribeSessions writes, for debugging, every client the broker knows
// with its subscriptions, and for each subscription whether the broker's
// topic index delivers to that client: a session whose subscriptions are
// not in the index receives nothing.
func (e *Embedded) DescribeSessions(w io.Writer) {
	clients := e.srv.Clients.GetAll()
	ids := slices.Sorted(maps.Keys(clients))
	for _, id := range ids {
		cl := clients[id]
		fmt.Fprintf(w, "session %q remote %s closed %v taken-over %v\n", id, cl.Net.Remote, cl.Closed(), cl.IsTakenOver())
		for filter := range cl.State.Subscriptions.GetAll() {
			_, indexed := e.srv.Topics.Subscribers(sampleTopic(filter)).Subscriptions[id]
			fmt.Fprintf(w, "  subscription %q in the topic index: %v\n", filter, indexed)
		}
	}
}

// sampleTopic is a topic filter matches: wildcards replaced by a level name.
func sampleTopic(filter string) string {
	levels := strings.Split(filter, "/")
	for i, l := range levels {
		switch l {
		case "+":
			levels[i] = "x"
		case "#":
			levels = append(levels[:i], "x")
			return strings.Join(levels, "/")
		}
	}
	return strings.Join(levels, "/")
}
