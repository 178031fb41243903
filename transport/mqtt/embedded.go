package mqtt

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Embedded is an in-process MQTT broker (mochi-mqtt) listening on one TCP
// address (plain or TLS). By default it admits every client, which
// StartEmbeddedWith allows only on loopback; with a password file or
// client certificates it admits only those (see EmbeddedOptions).
type Embedded struct {
	srv      *mochi.Server
	guard    *takeoverGuard // on every listener: see takeoverGuard
	addr     net.Addr
	scheme   string // "tcp" or "ssl"
	internal string // URL of the in-process clients; "" means URL()
}

// DefaultMaxPacket is the embedded broker's largest packet, in bytes: a
// client sending a larger one is disconnected by the broker, so no payload
// of unbounded size ever reaches a subscriber's queue.
const DefaultMaxPacket = 1 << 20

// EmbeddedOptions configures StartEmbeddedWith. Zero values mean defaults.
type EmbeddedOptions struct {
	// Addr is the listen address ("127.0.0.1:0" picks a free port).
	Addr string
	// MaxPacket is the largest packet in bytes; 0 means DefaultMaxPacket.
	MaxPacket uint32
	// Logger may be nil (a discarding logger is used).
	Logger *slog.Logger
	// TLS, if set, makes the listener serve TLS; with ClientAuth
	// RequireAndVerifyClientCert (ServerTLS with a client CA) a client
	// with a verified certificate is admitted.
	TLS *tls.Config
	// Users are bcrypt password hashes by user name (LoadPasswordFile).
	Users map[string][]byte
	// AllowAnonymous admits clients without credentials even on a
	// non-loopback address (with a warning). Without Users and client
	// certificates, a non-loopback Addr is refused unless it is set.
	AllowAnonymous bool
}

// StartEmbedded starts a broker listening on addr ("127.0.0.1:0" picks a free
// port; URL tells which), with packets up to DefaultMaxPacket. log may be nil
// (a discarding logger is used).
func StartEmbedded(addr string, log *slog.Logger) (*Embedded, error) {
	return StartEmbeddedLimit(addr, log, DefaultMaxPacket)
}

// StartEmbeddedLimit is StartEmbedded with packets up to maxPacket bytes
// (0 means DefaultMaxPacket).
func StartEmbeddedLimit(addr string, log *slog.Logger, maxPacket uint32) (*Embedded, error) {
	return StartEmbeddedWith(EmbeddedOptions{Addr: addr, MaxPacket: maxPacket, Logger: log})
}

// StartEmbeddedWith starts a broker as o says. An address that is not
// loopback with neither Users nor required client certificates fails
// with ErrAnonymousExposed unless o.AllowAnonymous. When the public
// listener needs credentials or TLS, a second, loopback plain listener
// admits only the in-process clients, with a secret made at start:
// InternalURL carries it.
func StartEmbeddedWith(o EmbeddedOptions) (*Embedded, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := o.checkExposure(log); err != nil {
		return nil, err
	}
	srv := newMochi(log, o.MaxPacket)
	e, err := o.listen(srv, log)
	if err != nil {
		srv.Close()
		return nil, err
	}
	if err := srv.Serve(); err != nil {
		srv.Close()
		return nil, fmt.Errorf("embedded broker: serve: %w", err)
	}
	return e, nil
}

func newMochi(log *slog.Logger, maxPacket uint32) *mochi.Server {
	if maxPacket == 0 {
		maxPacket = DefaultMaxPacket
	}
	caps := mochi.NewDefaultServerCapabilities()
	caps.MaximumPacketSize = maxPacket
	return mochi.New(&mochi.Options{Logger: brokerLog(log), InlineClient: true, Capabilities: caps})
}

// listen adds the auth hook and the listeners to srv.
func (o EmbeddedOptions) listen(srv *mochi.Server, log *slog.Logger) (*Embedded, error) {
	hook := &authHook{users: o.Users, anonymous: !o.requiresAuth() || o.AllowAnonymous, log: log}
	if err := srv.AddHook(hook, nil); err != nil {
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	guard := newTakeoverGuard()
	if err := srv.AddHook(guard, nil); err != nil {
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("embedded broker: listen %s: %w", o.Addr, err)
	}
	e := &Embedded{srv: srv, guard: guard, addr: ln.Addr(), scheme: "tcp"}
	if o.TLS != nil {
		ln, e.scheme = tls.NewListener(ln, o.TLS), "ssl"
	}
	if err := srv.AddListener(guardedListener{listeners.NewNet("fencegate", ln), guard}); err != nil {
		ln.Close()
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	if o.TLS == nil && !o.requiresAuth() {
		return e, nil
	}
	return e, e.listenInternal(hook)
}

// listenInternal opens the loopback listener of the in-process clients.
func (e *Embedded) listenInternal(hook *authHook) error {
	secret, err := newSecret()
	if err != nil {
		return err
	}
	hook.secret = secret
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("embedded broker: internal listener: %w", err)
	}
	if err := e.srv.AddListener(guardedListener{listeners.NewNet(internalListener, ln), e.guard}); err != nil {
		ln.Close()
		return fmt.Errorf("embedded broker: %w", err)
	}
	u := url.URL{Scheme: "tcp", User: url.UserPassword(internalUser, string(secret)), Host: ln.Addr().String()}
	e.internal = u.String()
	return nil
}

// URL is the broker's address for clients, "tcp://host:port" (or
// "ssl://host:port" with TLS).
func (e *Embedded) URL() string { return e.scheme + "://" + e.addr.String() }

// InternalURL is the address for clients in this process: URL, or, when
// the public listener needs credentials or TLS, a loopback plain listener
// with the per-start secret as user info (paho uses it as user name and
// password). It is a credential: never log it.
func (e *Embedded) InternalURL() string {
	if e.internal == "" {
		return e.URL()
	}
	return e.internal
}

// Addr is the address the broker listens on.
func (e *Embedded) Addr() string { return e.addr.String() }

// Server exposes the mochi server, e.g. for inline publishing in tests.
func (e *Embedded) Server() *mochi.Server { return e.srv }

// Close disconnects every client and stops the broker.
//
// It first closes the listeners itself, disconnecting their clients from a
// snapshot of the client list: mochi's own listener close lists clients with
// a read lock taken twice over (Clients.GetByListener calls Len), which
// deadlocks the broker for good when a client disconnects in between
// (mochi-mqtt/server issue 488). A listener closes its clients only once, so
// the Close that follows finds nothing left to list.
func (e *Embedded) Close() error {
	e.srv.Listeners.CloseAll(e.disconnectListenerClients)
	if err := e.srv.Close(); err != nil {
		return fmt.Errorf("embedded broker: close: %w", err)
	}
	return nil
}

// disconnectListenerClients disconnects the clients of listener, listed
// with one read lock (Clients.GetAll).
func (e *Embedded) disconnectListenerClients(listener string) {
	for _, cl := range e.srv.Clients.GetAll() {
		if cl.Net.Listener == listener && !cl.Closed() {
			_ = e.srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
		}
	}
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
