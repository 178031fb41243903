package server

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/buildinfo"
	"github.com/fencegate/fencegate/internal/httpauth"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/httpapi"
	"github.com/fencegate/fencegate/lease/metrics"
	"github.com/fencegate/fencegate/lease/mqttapi"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// Controller is one lease controller process: its store, key, APIs and
// metrics. Create it with New, then call Run once.
type Controller struct {
	cfg      Config
	log      *slog.Logger
	reg      *prometheus.Registry
	metrics  *metrics.Metrics
	store    lease.Store
	storeErr func() error // nil, or why the store stopped working
	leases   *lease.Controller
	broker   *mqtt.Embedded  // nil without an embedded broker
	mqtt     *mqttapi.Server // nil without an MQTT API
	http     *http.Server    // nil without HTTP
	httpLn   net.Listener
	closers  []func() // what New opened; closeAll runs them newest first
}

// New opens everything the controller needs — the key (generated if
// configured), the lease store, the embedded broker, the MQTT client and
// the HTTP listener — so that errors show at start and addresses are known
// before Run. It validates cfg first; on error, whatever was opened is
// closed again. log may be nil (nothing is logged). New connects to no
// broker: Run does.
func New(cfg Config, log *slog.Logger) (_ *Controller, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{cfg: cfg, log: log, reg: prometheus.NewRegistry()}
	defer func() {
		if err != nil {
			c.closeAll()
		}
	}()
	signer, err := loadSigner(cfg, log)
	if err != nil {
		return nil, err
	}
	c.registerMetrics()
	if err := c.openStore(); err != nil {
		return nil, err
	}
	if err := c.openMQTT(); err != nil {
		return nil, err
	}
	trusted, err := loadTrusted(cfg.TrustKeys)
	if err != nil {
		return nil, err
	}
	if err := c.newLeases(signer, trusted); err != nil {
		return nil, err
	}
	return c, c.listenHTTP()
}

// registerMetrics registers the process and lease metrics. The gauges
// read c.leases at scrape time, which is after New has set it.
func (c *Controller) registerMetrics() {
	c.reg.MustRegister(buildinfo.Collector(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	c.metrics = metrics.New(c.reg, func() int { return c.leases.ActiveLeases() })
	metrics.RegisterDomains(c.reg, func() int { return c.leases.Domains() })
}

// newLeases creates the lease controller, wired to the metrics and the
// grant announcements.
func (c *Controller) newLeases(signer *fence.Signer, trusted []ed25519.PublicKey) error {
	lc := lease.Config{Store: c.store, Signer: signer, Trusted: trusted, Logger: c.log.With("component", "lease"),
		Observer: c.metrics, OnGrant: c.granted, Domains: c.cfg.Domains, MaxDomains: c.cfg.MaxDomains}
	if c.mqtt != nil {
		lc.EpochFloor = c.mqtt // no grant below what the broker shows
	}
	var err error
	c.leases, err = lease.New(context.Background(), lc)
	return err
}

// granted is the lease controller's OnGrant: log, count and announce t.
func (c *Controller) granted(t fence.Token) {
	c.log.Info("lease granted", "domain", t.Domain, "holder", t.Holder, "token", t.String(), "ttl", t.TTL())
	c.metrics.Granted()
	if c.mqtt != nil {
		c.mqtt.Announce(t)
	}
}

// openMQTT starts the embedded broker and builds the MQTT API, as
// configured.
func (c *Controller) openMQTT() error {
	broker := c.cfg.MQTT.Config
	if c.cfg.EmbeddedBroker != "" {
		o, err := c.embeddedOptions()
		if err != nil {
			return err
		}
		b, err := mqtt.StartEmbeddedWith(o)
		if err != nil {
			return err
		}
		c.broker = b
		c.onClose(func() { b.Close() })
		c.log.Info("embedded broker listening", "addr", b.Addr())
		if broker.Broker == "" {
			broker.Broker = b.InternalURL() // a credential: never logged
		}
	}
	if broker.Broker == "" {
		return nil
	}
	s, err := mqttapi.New(mqttapi.Config{MQTT: broker, Topics: protocol.Topics{Prefix: c.cfg.TopicPrefix}, Logger: c.log,
		ShareGroup: c.cfg.MQTTShareGroup, ReplyPrefixes: c.cfg.MQTT.ReplyPrefixes})
	if err != nil {
		return err
	}
	c.mqtt = s
	c.onClose(s.Close)
	return nil
}

// listenHTTP opens the HTTP listener, if configured.
func (c *Controller) listenHTTP() error {
	if c.cfg.HTTP == "" {
		return nil
	}
	ln, err := net.Listen("tcp", httpauth.DefaultHost(c.cfg.HTTP))
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	served, auth, err := c.httpListener(ln)
	if err != nil {
		ln.Close()
		return err
	}
	ln = served
	hc := httpapi.Config{Controller: c.leases, Ready: c.Ready, Logger: c.log, Auth: auth, Policy: c.cfg.Authz,
		Metrics: promhttp.HandlerFor(c.reg, promhttp.HandlerOpts{Registry: c.reg})}
	if b, ok := c.store.(httpapi.Backuper); ok {
		hc.Backup = b
	}
	h := httpapi.New(hc)
	c.http = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	c.httpLn = ln
	c.log.Info("http listening", "addr", ln.Addr().String())
	return nil
}

// Ready is /readyz: nil once the store works and, with an MQTT API, the
// broker is connected and subscribed. Safe for concurrent use.
func (c *Controller) Ready() error {
	if err := c.storeErr(); err != nil {
		return err
	}
	if c.mqtt != nil && !c.mqtt.Ready() {
		return errors.New("not connected to the MQTT broker")
	}
	return nil
}

// HTTPAddr is the HTTP listener's address, or "" without HTTP.
func (c *Controller) HTTPAddr() string {
	if c.httpLn == nil {
		return ""
	}
	return c.httpLn.Addr().String()
}

// BrokerURL is the URL of the MQTT broker the controller serves on (the
// embedded one unless mqtt.broker is set), or "" without MQTT.
func (c *Controller) BrokerURL() string {
	if c.cfg.MQTT.Broker == "" && c.broker != nil {
		return c.broker.URL()
	}
	return c.cfg.MQTT.Broker
}

func (c *Controller) onClose(f func()) { c.closers = append(c.closers, f) }

// closeAll stops what New opened, newest first: the MQTT API, the
// embedded broker, and last the store. It is safe on a partly opened
// controller.
func (c *Controller) closeAll() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	c.closers = nil
}
