package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/atomicfile"
	"github.com/fencegate/fencegate/internal/buildinfo"
	"github.com/fencegate/fencegate/internal/httpauth"
	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// Version is reported in the agent's status messages and GET /v1/status:
// the module version the binary was built from (internal/buildinfo).
var Version = buildinfo.Read().Version

// Agent owns the devices of one gateway. Create it with New, then call Run
// once.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	env     *env
	devices []*device
	byID    map[string]*device
	domains map[string]*domain // by name; one per fencing domain of the devices
	boot    time.Time

	broker   *mqtt.Embedded          // nil when an external broker is configured
	httpLn   net.Listener            // nil when HTTP is off
	httpAuth *httpauth.Authenticator // credentials of the operator endpoints; nil: loopback clients only
	conn     *connection

	failOnce sync.Once
	failed   chan struct{} // closed by fail
	failErr  error         // set before failed is closed
}

// New opens everything the agent needs — trust keys, the fence store, the
// drivers, the embedded broker and the HTTP listener — so that errors show
// at start and addresses are known before Run. On error, whatever was
// opened is closed again. log may be nil (nothing is logged).
func New(cfg Config, log *slog.Logger) (_ *Agent, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkDrivers(cfg); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Agent{cfg: cfg, log: log, byID: map[string]*device{}, domains: map[string]*domain{}, boot: time.Now(),
		failed: make(chan struct{})}
	defer func() {
		if err != nil {
			a.closeAll()
		}
	}()
	m := newMetrics()
	topics := protocol.Topics{Prefix: cfg.MQTT.Prefix}
	a.env = &env{topics: topics, m: m, agentID: cfg.Agent.ID, maxPayload: cfg.Limits.MaxPayload, fatal: a.fail,
		replies: protocol.ReplyRule{Topics: topics, Prefixes: cfg.MQTT.ReplyPrefixes}}
	if a.env.keys, err = loadKeys(cfg.Trust.Keys, verifiedCacheSize(cfg)); err != nil {
		return nil, err
	}
	if a.httpAuth, err = loadHTTPAuth(cfg.HTTP.TokenFile, a.log.With("component", "http")); err != nil {
		return nil, err
	}
	if a.env.store, err = openStore(cfg.Agent.DataDir, cfg.Journal, m); err != nil {
		return nil, err
	}
	m.reg.MustRegister(inDoubtCollector{store: a.env.store, devices: cfg.Devices})
	a.logInDoubt()
	if err = a.rehomeDevices(); err != nil {
		return nil, err
	}
	if err = a.listen(); err != nil {
		return nil, err
	}
	if a.conn, err = a.newConnection(); err != nil {
		return nil, err
	}
	if err = a.openDevices(); err != nil {
		return nil, err
	}
	a.env.replies.Deny = a.driverTopics()
	return a, nil
}

// verifiedCacheSize is how many verified tokens the agent remembers: room
// for two live leases per fencing domain of its devices, at least
// fence.DefaultCacheSize. A smaller cache than the domains' live tokens
// would evict each token before its next command and verify every command
// again (the cache evicts in insertion order).
func verifiedCacheSize(cfg Config) int {
	domains := map[string]bool{}
	for _, d := range cfg.Devices {
		domains[d.Domain] = true
	}
	return max(fence.DefaultCacheSize, 2*len(domains))
}

func loadKeys(paths []string, cacheSize int) (*fence.KeyRing, error) {
	ring, err := fence.NewKeyRing(cacheSize)
	if err != nil {
		return nil, err
	}
	for i, p := range paths {
		pub, err := fence.LoadPublicKey(p)
		if err != nil {
			return nil, fmt.Errorf("trust.keys[%d]: %w", i, err)
		}
		if err := ring.Add(pub); err != nil {
			return nil, fmt.Errorf("trust.keys[%d]: %w", i, err)
		}
	}
	return ring, nil
}

func openStore(dir string, j JournalConfig, m *metrics) (*persist.Store, error) {
	if err := atomicfile.MkdirAll(dir, 0o700); err != nil { // durable: a power cut must not lose the new store's directory
		return nil, fmt.Errorf("agent.data_dir: %w", err)
	}
	return persist.Open(filepath.Join(dir, "fence.db"), persist.Options{MaxRecords: j.MaxRecords, MaxAge: j.MaxAge, OnCommit: m.onCommit})
}

func (a *Agent) logInDoubt() {
	for _, c := range a.env.store.InDoubtAtOpen() {
		a.log.Warn("command in doubt after restart: accepted, no result recorded", "device", c.Device, "id", c.ID)
	}
}

// rehomeDevices forgets the own fence record of every device the config
// moved to another fencing domain, so that the new domain's fence governs
// it (the old domain's tokens are refused by the domain check anyway).
func (a *Agent) rehomeDevices() error {
	for _, dc := range a.cfg.Devices {
		moved, err := a.env.store.Rehome(context.Background(), dc.ID, dc.Domain)
		if err != nil {
			return fmt.Errorf("devices %s: %w", dc.ID, err)
		}
		if moved {
			a.log.Warn("device moved to another fencing domain; the new domain's fence governs it", "device", dc.ID, "domain", dc.Domain)
		}
	}
	return nil
}

func (a *Agent) openDevices() error {
	fences, err := a.env.store.DomainFences()
	if err != nil {
		return err
	}
	for i, dc := range a.cfg.Devices {
		dlog := a.log.With("device", dc.ID)
		settings := devices.Settings{Node: &a.cfg.Devices[i].Settings, Path: fmt.Sprintf("devices[%d].settings", i),
			Broker: a.dialURL()}
		drv, err := devices.Open(dc.Driver, dc.ID, settings, dlog)
		if err != nil {
			return fmt.Errorf("devices[%d] (%s): %w", i, dc.ID, err)
		}
		d := newDevice(dc, a.domainOf(dc.Domain, fences), drv, a.env, a.cfg.Limits.Queue, dlog)
		d.dom.devices = append(d.dom.devices, d)
		if r, ok := drv.(devices.AvailabilityReporter); ok {
			r.OnAvailability(d.setAvailable)
		}
		a.devices = append(a.devices, d)
		a.byID[dc.ID] = d
	}
	return nil
}

// domainOf returns the agent's domain of that name, creating it with its
// durable fence on first use.
func (a *Agent) domainOf(name string, fences map[string]persist.Fence) *domain {
	if dm := a.domains[name]; dm != nil {
		return dm
	}
	dm := &domain{name: name, store: a.env.store, m: a.env.m, fence: fences[name].Token,
		log: a.log.With("domain", name)}
	a.domains[name] = dm
	return dm
}

// driverTopics collects the topic filters the drivers publish to; a reply
// never goes there.
func (a *Agent) driverTopics() []string {
	var out []string
	for _, d := range a.devices {
		if tp, ok := d.driver.(devices.TopicPublisher); ok {
			out = append(out, tp.PublishedTopics()...)
		}
	}
	return out
}

// listen starts the embedded broker (if no broker is configured) and opens
// the HTTP listener (unless it is off).
func (a *Agent) listen() error {
	if a.cfg.MQTT.Broker == "" {
		b, err := a.startEmbedded()
		if err != nil {
			return err
		}
		a.broker = b
	}
	if a.cfg.HTTP.Listen != "off" {
		ln, err := net.Listen("tcp", a.cfg.HTTP.Listen)
		if err != nil {
			return fmt.Errorf("http.listen: %w", err)
		}
		a.httpLn = ln
	}
	return nil
}

// maxPacket is the embedded broker's packet limit: room for the largest
// command payload and its topic, never below the broker's default.
func (a *Agent) maxPacket() uint32 {
	return uint32(max(mqtt.DefaultMaxPacket, a.cfg.Limits.MaxPayload+8<<10))
}

// BrokerURL is the broker the agent connects to.
func (a *Agent) BrokerURL() string {
	if a.broker != nil {
		return a.broker.URL()
	}
	return a.cfg.MQTT.Broker
}

// HTTPAddr is the HTTP listener's address, or "" if HTTP is off.
func (a *Agent) HTTPAddr() string {
	if a.httpLn == nil {
		return ""
	}
	return a.httpLn.Addr().String()
}

// Run serves until ctx is done or the fence store fails, then shuts down
// in order: stop taking commands, finish what was taken (results are
// journaled and published), announce offline, disconnect, close drivers,
// the broker and, last, the store. It returns nil after a clean stop and
// the store's error after a failure.
func (a *Agent) Run(ctx context.Context) error {
	conn := a.conn
	srv := a.serveHTTP()
	conn.start()
	select {
	case <-ctx.Done():
	case <-a.failed:
	}
	a.shutdown(conn, srv)
	return a.failErr
}

func (a *Agent) shutdown(conn *connection, srv *http.Server) {
	a.log.Info("stopping: finishing queued commands")
	conn.stopIntake()
	a.drainWorkers()
	for _, dm := range a.domains {
		dm.flushAnnouncement()
	}
	conn.close()
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
	}
	a.closeAll()
	a.log.Info("stopped")
}

// drainWorkers closes every device's inbox (later arrivals stay
// unacknowledged and unanswered; senders retry them with the same id),
// waits until what was queued is decided, then closes the apply queues and
// waits until what was accepted is applied and its result journaled.
func (a *Agent) drainWorkers() {
	for _, d := range a.devices {
		d.inbox.close()
	}
	a.env.deciders.Wait()
	for _, d := range a.devices {
		d.applyQ.close()
	}
	a.env.appliers.Wait()
}

// closeAll closes drivers, the broker, the HTTP listener and the store, in
// that order; it is safe on a partly opened agent.
func (a *Agent) closeAll() {
	for _, d := range a.devices {
		if err := d.driver.Close(); err != nil {
			a.log.Warn("closing driver", "device", d.id, "err", err)
		}
	}
	if a.broker != nil {
		_ = a.broker.Close()
	}
	if a.httpLn != nil {
		_ = a.httpLn.Close()
	}
	if a.env != nil && a.env.store != nil {
		if err := a.env.store.Close(); err != nil && !errors.Is(err, persist.ErrClosed) {
			a.log.Error("closing fence store", "err", err)
		}
	}
}

// fail stops the agent after a fence store failure: nothing more can be
// fenced safely. It may be called from any goroutine, more than once.
func (a *Agent) fail(err error) {
	a.failOnce.Do(func() {
		a.log.Error("fence store failed; stopping", "err", err)
		a.failErr = fmt.Errorf("agent: %w", err)
		close(a.failed)
	})
}
