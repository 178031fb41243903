package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/boltstore"
	"github.com/fencegate/fencegate/lease/httpapi"
	"github.com/fencegate/fencegate/lease/metrics"
	"github.com/fencegate/fencegate/lease/mqttapi"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// Timing of the serve loop.
const (
	shutdownTimeout = 5 * time.Second
	healthInterval  = time.Second
)

// components are what serve started; close stops them in reverse order.
type components struct {
	log      *slog.Logger
	store    lease.Store
	storeErr func() error // nil, or why the store stopped working
	broker   *mqtt.Embedded
	mqtt     *mqttapi.Server
	http     *http.Server
	httpLn   net.Listener
	closed   []func()
}

// serve runs the controller until ctx is cancelled (a clean exit) or the
// store fails.
func serve(ctx context.Context, cfg Config, stderr io.Writer) error {
	level, _ := cfg.level() // validated
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	c := &components{log: log}
	defer c.close()
	if err := c.start(ctx, cfg); err != nil {
		return err
	}
	log.Info("controller running", "epoch", mustEpoch(ctx, c.store), "store", cmpOr(cfg.Store, storeBolt))
	return c.wait(ctx)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func mustEpoch(ctx context.Context, s lease.Store) uint64 {
	e, _ := s.Epoch(ctx)
	return e
}

// start opens the store, key and APIs.
func (c *components) start(ctx context.Context, cfg Config) error {
	signer, err := loadSigner(cfg, c.log)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var m *metrics.Metrics
	if err := c.openStore(ctx, cfg, func(ops int, took time.Duration) { m.ObserveCommit(ops, took) }); err != nil {
		return err
	}
	if err := c.startMQTT(cfg); err != nil {
		return err
	}
	ctrl, err := c.newController(ctx, cfg, signer, &m, reg)
	if err != nil {
		return err
	}
	if c.mqtt != nil {
		c.mqtt.Start(ctrl)
	}
	return c.startHTTP(cfg, ctrl, reg)
}

func (c *components) openStore(ctx context.Context, cfg Config, onCommit func(int, time.Duration)) error {
	if cfg.Store == storeEtcd {
		return c.openEtcd(ctx, cfg)
	}
	if err := ensureDir(cfg.DataDir); err != nil {
		return err
	}
	s, err := boltstore.Open(storePath(cfg.DataDir), boltstore.Options{OnCommit: onCommit, Epoch: cfg.Epoch})
	if err != nil {
		return err
	}
	c.store, c.storeErr = s, s.Err
	c.onClose(func() {
		if err := s.Close(); err != nil {
			c.log.Error("close store", "err", err)
		}
	})
	return nil
}

// newController wires the controller to metrics and grant announcements.
// *m is set before any store commit can call the OnCommit that reads it.
func (c *components) newController(ctx context.Context, cfg Config, signer *fence.Signer, m **metrics.Metrics, reg prometheus.Registerer) (*lease.Controller, error) {
	var ctrl *lease.Controller
	*m = metrics.New(reg, func() int { return ctrl.ActiveLeases() })
	metrics.RegisterDomains(reg, func() int { return ctrl.Domains() })
	onGrant := func(t fence.Token) {
		(*m).Granted()
		if c.mqtt != nil {
			c.mqtt.Announce(t)
		}
	}
	lc := lease.Config{Store: c.store, Signer: signer, Logger: c.log.With("component", "lease"),
		Observer: *m, OnGrant: onGrant, Domains: cfg.Domains, MaxDomains: cfg.MaxDomains}
	if c.mqtt != nil {
		lc.EpochFloor = c.mqtt // no grant below what the broker shows
	}
	ctrl, err := lease.New(ctx, lc)
	return ctrl, err
}

// startMQTT starts the embedded broker and the MQTT API, as configured.
func (c *components) startMQTT(cfg Config) error {
	if cfg.EmbeddedBroker != "" {
		b, err := mqtt.StartEmbedded(cfg.EmbeddedBroker, c.log.With("component", "broker"))
		if err != nil {
			return err
		}
		c.broker = b
		c.onClose(func() { b.Close() })
		c.log.Info("embedded broker listening", "addr", b.Addr())
		if cfg.MQTT.Broker == "" {
			cfg.MQTT.Broker = b.URL()
		}
	}
	if cfg.MQTT.Broker == "" {
		return nil
	}
	s, err := mqttapi.New(mqttapi.Config{MQTT: cfg.MQTT.Config, Topics: protocol.Topics{Prefix: cfg.TopicPrefix}, Logger: c.log,
		ShareGroup: cfg.MQTTShareGroup, ReplyPrefixes: cfg.MQTT.ReplyPrefixes})
	if err != nil {
		return err
	}
	c.mqtt = s
	c.onClose(s.Close)
	return nil
}

func (c *components) startHTTP(cfg Config, ctrl *lease.Controller, reg *prometheus.Registry) error {
	if cfg.HTTP == "" {
		return nil
	}
	ln, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	h := httpapi.New(httpapi.Config{Controller: ctrl, Ready: c.ready, Logger: c.log,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})})
	c.http = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	c.httpLn = ln
	c.log.Info("http listening", "addr", ln.Addr().String())
	return nil
}

// ready is /readyz: the store works and the broker is connected.
func (c *components) ready() error {
	if err := c.storeErr(); err != nil {
		return err
	}
	if c.mqtt != nil && !c.mqtt.Ready() {
		return errors.New("not connected to the MQTT broker")
	}
	return nil
}

// wait serves HTTP until ctx ends or the store fails.
func (c *components) wait(ctx context.Context) error {
	httpErr := make(chan error, 1)
	if c.http != nil {
		go func() { httpErr <- c.http.Serve(c.httpLn) }()
		defer c.stopHTTP(httpErr)
	}
	tick := time.NewTicker(healthInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			c.log.Info("shutting down")
			return nil
		case err := <-httpErr:
			httpErr <- err // for stopHTTP
			return fmt.Errorf("http: %w", err)
		case <-tick.C:
			if err := c.storeErr(); err != nil {
				return fmt.Errorf("lease store failed: %w", err)
			}
		}
	}
}

// stopHTTP shuts the HTTP server down within shutdownTimeout and waits for
// its Serve to return.
func (c *components) stopHTTP(served <-chan error) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := c.http.Shutdown(ctx); err != nil {
		c.http.Close()
	}
	<-served
}

func (c *components) onClose(f func()) { c.closed = append(c.closed, f) }

// close stops everything started, newest first.
func (c *components) close() {
	for i := len(c.closed) - 1; i >= 0; i-- {
		c.closed[i]()
	}
}
