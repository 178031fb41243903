package server

import (
	"context"
	"fmt"
	"time"
)

// Timing of Run.
const (
	shutdownTimeout = 5 * time.Second
	healthInterval  = time.Second
)

// Run connects the MQTT API (in the background, retrying) and serves it
// and HTTP until ctx ends (nil: a clean stop), the store fails or the HTTP
// server fails (an error). It then shuts down in order: HTTP (within 5 s),
// the MQTT API, the embedded broker and last the store. Call it once; the
// Controller cannot be used after Run returns.
func (c *Controller) Run(ctx context.Context) error {
	defer c.closeAll()
	epoch, _ := c.store.Epoch(ctx)
	c.log.Info("controller running", "epoch", epoch, "store", c.cfg.storeName())
	if c.mqtt != nil {
		c.mqtt.Start(c.leases)
	}
	if c.http == nil {
		return c.watch(ctx, nil)
	}
	served := make(chan error, 1)
	go func() { served <- c.http.Serve(c.httpLn) }()
	defer c.stopHTTP(served)
	return c.watch(ctx, served)
}

// watch checks the store's health until ctx ends, the store fails or
// served (nil without HTTP) reports the end of the HTTP server.
func (c *Controller) watch(ctx context.Context, served chan error) error {
	tick := time.NewTicker(healthInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			c.log.Info("shutting down")
			return nil
		case err := <-served:
			served <- err // for stopHTTP
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
func (c *Controller) stopHTTP(served <-chan error) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := c.http.Shutdown(ctx); err != nil {
		c.http.Close()
	}
	<-served
}
