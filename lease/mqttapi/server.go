package mqttapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// Defaults of Config.
const (
	DefaultQueueSize   = 4096
	DefaultMaxInFlight = 4096
	// publishTimeout bounds the wait for the broker to take one publish.
	publishTimeout = 10 * time.Second
)

// Handler runs one lease operation; *lease.Controller implements it. It is
// called concurrently.
type Handler interface {
	Do(ctx context.Context, op protocol.LeaseOp, domain string, req protocol.Request) protocol.Response
}

// Config configures a Server. MQTT.Broker is required; zero values of the
// other fields mean defaults.
type Config struct {
	MQTT   mqtt.Config
	Topics protocol.Topics
	Logger *slog.Logger
	// QueueSize bounds requests received but not yet dispatched; requests
	// beyond it are dropped with a log line. Default 4096.
	QueueSize int
	// MaxInFlight bounds requests being handled at once (waiting acquires
	// included). Default 4096.
	MaxInFlight int
	// ShareGroup, if set, subscribes to the requests through the MQTT
	// shared subscription $share/{ShareGroup}/{prefix}/leases/+/+, so that
	// the broker hands each request to one of the controller replicas in
	// the group instead of to all of them (mochi and Mosquitto support it
	// for MQTT 3.1.1 clients). Replicas need distinct client ids.
	ShareGroup string
	// ReplyPrefixes are topic prefixes where responses may go besides the
	// reply namespace Topics.Replies() (fencegate/v1/replies/), which is
	// always allowed. Each must pass CheckReplyPrefix. A reply_to outside
	// them, a $ topic or a protocol topic is never published to
	// (protocol.ReplyRule): the request is logged and not answered.
	ReplyPrefixes []string
}

// CheckReplyPrefix returns nil if p can be an allowed reply prefix: not
// empty, no wildcard or NUL, not a $ topic, at most protocol.MaxReplyTopicBytes.
func CheckReplyPrefix(p string) error {
	switch {
	case p == "" || len(p) > protocol.MaxReplyTopicBytes:
		return fmt.Errorf("%w: reply prefix %q must be 1..%d bytes", lease.ErrConfig, p, protocol.MaxReplyTopicBytes)
	case strings.ContainsAny(p, "+#\x00"):
		return fmt.Errorf("%w: reply prefix %q has a wildcard or NUL", lease.ErrConfig, p)
	case strings.HasPrefix(p, "$"):
		return fmt.Errorf("%w: reply prefix %q is a $ topic", lease.ErrConfig, p)
	}
	return nil
}

// replyRule is the rule of where responses may go: the reply namespace and
// cfg's further prefixes.
func (cfg Config) replyRule() (protocol.ReplyRule, error) {
	prefixes := []string{cfg.Topics.Replies()}
	for _, p := range cfg.ReplyPrefixes {
		if err := CheckReplyPrefix(p); err != nil {
			return protocol.ReplyRule{}, err
		}
		prefixes = append(prefixes, p)
	}
	return protocol.ReplyRule{Topics: cfg.Topics, Prefixes: prefixes}, nil
}

// Server is the MQTT front of a lease controller. Create it with New, hand
// its Announce to the controller's OnGrant, then Start it; Close stops it.
type Server struct {
	cfg    Config
	log    *slog.Logger
	client paho.Client
	pub    *publisher
	queue  chan message
	rule   protocol.ReplyRule // where responses may go

	subscribed atomic.Bool // set when the request subscription is in place

	// verify checks grant announcements seen on the broker; set by Start
	// when the handler can verify tokens, nil otherwise.
	verify func(raw string) (fence.Token, error)

	watchMu sync.Mutex        // guards watched
	watched map[string]*watch // domains whose grant topic this connection subscribed

	obs *observed // epochs seen on the broker (EpochFloor)

	ctx     context.Context // cancelled by Close: ends waiting acquires
	cancel  context.CancelFunc
	spawnMu sync.Mutex     // orders spawn with Close's cancel
	wg      sync.WaitGroup // dispatcher, handlers, publisher and connection setup

	startOnce sync.Once
	closeOnce sync.Once
}

type message struct {
	topic   string
	payload []byte
}

// New builds a Server and its client without connecting.
func New(cfg Config) (*Server, error) {
	if err := cfg.MQTT.Validate("mqtt"); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if strings.ContainsAny(cfg.ShareGroup, "/+#$\x00") {
		return nil, fmt.Errorf("%w: share group %q has a character of / + # $ NUL", lease.ErrConfig, cfg.ShareGroup)
	}
	if cfg.MQTT.ClientID == "" {
		cfg.MQTT.ClientID = "fencegate-controller"
	}
	rule, err := cfg.replyRule()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "mqtt"), queue: make(chan message, cfg.QueueSize),
		rule: rule, watched: map[string]*watch{}, obs: newObserved(cfg.Topics, cfg.MQTT.ClientID)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	opts, err := cfg.MQTT.ClientOptions(s.onConnect)
	if err != nil {
		return nil, err
	}
	opts.SetConnectionLostHandler(func(_ paho.Client, err error) {
		s.subscribed.Store(false)
		s.log.Warn("broker connection lost", "err", err)
	})
	s.client = paho.NewClient(opts)
	s.pub = newPublisher(s.client, cfg.Topics, s.log)
	return s, nil
}

// Announce queues t's wire form for retained publication on its domain's
// grant topic, unless a newer token of the domain was announced. It never
// blocks; it is meant as the controller's OnGrant.
func (s *Server) Announce(t fence.Token) {
	s.pub.announce(t)
	s.watchGrant(t.Domain)
}

// TokenVerifier is implemented by handlers that can verify tokens (the
// lease controller). With one, the server also watches the grant topics and
// keeps the newest verified grant retained there, even when replicas or a
// stray client publish older or forged ones.
type TokenVerifier interface {
	VerifyToken(raw string) (fence.Token, error)
}

// LeaseLister is implemented by handlers that can list their live leases
// (the lease controller). Start announces them all again, so a grant topic
// cleared or overwritten while the controller was down is restored.
type LeaseLister interface {
	LiveLeases(ctx context.Context) ([]fence.Token, error)
}

// Start announces h's live leases if it is a LeaseLister, connects in the
// background (retrying until the broker answers) and serves requests with
// h until Close. It returns once the leases are listed, without waiting
// for the broker.
func (s *Server) Start(h Handler) {
	s.startOnce.Do(func() {
		if v, ok := h.(TokenVerifier); ok {
			s.verify = v.VerifyToken
		}
		if l, ok := h.(LeaseLister); ok {
			s.announceLive(l)
		}
		s.wg.Add(2)
		go s.dispatch(h)
		go s.pub.run(s.ctx, &s.wg)
		s.client.Connect() // completes on connect; onConnect subscribes
	})
}

// announceLive queues every live lease of l for announcement.
func (s *Server) announceLive(l LeaseLister) {
	toks, err := l.LiveLeases(s.ctx)
	if err != nil {
		s.log.Error("cannot re-announce the stored leases", "err", err)
		return
	}
	for _, t := range toks {
		s.Announce(t)
	}
}

// Ready reports whether the server is connected and subscribed.
func (s *Server) Ready() bool { return s.subscribed.Load() && s.client.IsConnectionOpen() }

// Close stops taking requests, ends waiting acquires, waits for every
// handler and the publisher, and disconnects.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.spawnMu.Lock()
		s.cancel()
		s.spawnMu.Unlock()
		s.wg.Wait()
		s.client.Disconnect(250)
	})
}

// onConnect runs in a paho goroutine after every connection and hands the
// connection's setup to a goroutine (waiting here would block paho's
// connection handling).
func (s *Server) onConnect(paho.Client) {
	s.log.Info("connected to broker", "broker", mqtt.Redact(s.cfg.MQTT.Broker))
	s.spawn(s.setUp)
}

// setUp prepares a new connection: first it reads what the broker retains
// (the grants of every known domain, every device state), so a newer
// grant is adopted before ours are republished and the epoch floor is
// known; then it republishes the newest grants (a restarted broker lost
// them) and only then subscribes to the requests.
func (s *Server) setUp() {
	if err := s.observe(s.ctx); err != nil {
		s.log.Error("reading the retained grants and device states failed", "err", err)
	}
	s.pub.republishAll()
	if err := waitToken(s.ctx, s.client.Subscribe(s.requestFilter(), 1, s.receive)); err != nil {
		s.log.Error("subscribe failed", "err", err)
		return
	}
	s.subscribed.Store(true)
}

// spawn runs f in a goroutine that Close waits for, unless Close began.
func (s *Server) spawn(f func()) {
	s.spawnMu.Lock()
	defer s.spawnMu.Unlock()
	if s.ctx.Err() != nil {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// requestFilter is the subscription of lease requests: shared by the
// replicas of ShareGroup if set. It also matches the grant topics (so that
// a request to an unknown op can be answered); handle skips grants.
func (s *Server) requestFilter() string {
	if s.cfg.ShareGroup != "" {
		return "$share/" + s.cfg.ShareGroup + "/" + s.cfg.Topics.AllLeaseOps()
	}
	return s.cfg.Topics.AllLeaseOps()
}

// watchGrant subscribes to domain's grant topic (exact, not shared: every
// replica sees every announcement) once per connection, if the server
// verifies grants and is connected (setUp subscribes every known domain
// at connection). Exact topics, not a wildcard: the embedded broker
// (mochi-mqtt) races when a wildcard subscription scans retained messages
// while one is being replaced (mochi-mqtt issue 200).
func (s *Server) watchGrant(domain string) {
	if s.verify == nil || !s.client.IsConnectionOpen() {
		return
	}
	if w, fresh := s.watchEntry(domain); fresh {
		s.client.Subscribe(s.cfg.Topics.LeaseGrant(domain), 1, s.onGrantSeen)
		close(w.done) // our own grant is the newest we know
	}
}

// onGrantSeen is the paho callback of the grant topics. It verifies the
// announcement (cheap after the first time: the key ring caches) and lets
// the publisher heal the retained grant if it is not the newest.
func (s *Server) onGrantSeen(_ paho.Client, m paho.Message) {
	domain, _, err := s.cfg.Topics.ParseLeaseTopic(m.Topic())
	if err != nil {
		return
	}
	var g protocol.Grant
	var t fence.Token
	ok := json.Unmarshal(m.Payload(), &g) == nil
	if ok {
		t, err = s.verify(g.Token)
		ok = err == nil && t.Domain == domain
	}
	s.pub.observe(domain, t, ok)
}

// receive is the paho callback: it only queues.
func (s *Server) receive(_ paho.Client, m paho.Message) {
	msg := message{topic: m.Topic(), payload: append([]byte(nil), m.Payload()...)}
	select {
	case s.queue <- msg:
	default:
		s.log.Warn("request queue full, dropping request", "topic", msg.topic)
	}
}

// dispatch runs each queued request in its own goroutine, at most
// MaxInFlight at once, until Close.
func (s *Server) dispatch(h Handler) {
	defer s.wg.Done()
	slots := make(chan struct{}, s.cfg.MaxInFlight)
	for {
		var m message
		select {
		case m = <-s.queue:
		case <-s.ctx.Done():
			return
		}
		select {
		case slots <- struct{}{}:
		case <-s.ctx.Done():
			return
		}
		s.wg.Add(1)
		go func() {
			defer func() { <-slots; s.wg.Done() }()
			s.handle(h, m)
		}()
	}
}

// handle answers one request; bad input is answered bad_request where a
// reply topic can be found, and logged.
func (s *Server) handle(h Handler, m message) {
	domain, opName, err := s.cfg.Topics.ParseLeaseTopic(m.topic)
	if err != nil {
		s.log.Warn("request on unexpected topic", "topic", m.topic)
		return
	}
	if opName == "grant" {
		return // announcements (ours and other replicas') come back through the wildcard
	}
	req, err := protocol.DecodeRequest(m.payload)
	if err != nil { // answer the rejection where the payload says, if it can be salvaged
		req.RequestID = protocol.Salvage(m.payload, "request_id", protocol.MaxSalvageBytes)
		req.ReplyTo = protocol.Salvage(m.payload, "reply_to", protocol.MaxReplyTopicBytes)
	}
	if rerr := s.rule.Check(req.ReplyTo); rerr != nil {
		// No safe topic to answer on; a well-formed request is not run.
		s.log.Warn("bad request, no reply possible", "topic", m.topic, "err", errors.Join(err, rerr))
		return
	}
	var resp protocol.Response
	op, operr := protocol.ParseLeaseOp(opName)
	if err = errors.Join(err, operr); err != nil {
		resp = lease.BadRequest(err)
		resp.RequestID = req.RequestID
	} else {
		resp = h.Do(s.ctx, op, domain, req)
	}
	if resp.Code == protocol.CodeBadRequest {
		s.log.Warn("bad request", "topic", m.topic, "request_id", req.RequestID, "err", resp.Message)
	}
	s.reply(req.ReplyTo, resp)
}

func (s *Server) reply(topic string, resp protocol.Response) {
	payload, err := json.Marshal(resp)
	if err != nil {
		s.log.Error("encode response", "err", err)
		return
	}
	if err := mqtt.Wait(s.client.Publish(topic, 1, false, payload), publishTimeout); err != nil {
		s.log.Warn("publish response failed", "reply_to", topic, "err", err)
	}
}
