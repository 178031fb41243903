package agent

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// DeviceStatus is one entry of GET /v1/devices.
type DeviceStatus struct {
	ID         string           `json:"id"`
	Domain     string           `json:"domain"`
	Driver     string           `json:"driver"`
	Available  bool             `json:"available"`
	Fence      *fence.Fence     `json:"fence,omitempty"`
	Queue      int              `json:"queue"`
	LastResult *protocol.Result `json:"last_result,omitempty"`
}

func (a *Agent) serveHTTP() *http.Server {
	if a.httpLn == nil {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.env.m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /v1/devices", a.listDevices)
	srv := &http.Server{Handler: mux}
	go func() {
		if err := srv.Serve(a.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("http server", "err", err)
		}
	}()
	return srv
}

// readyz is ready when the broker connection is up and the store healthy.
func (a *Agent) readyz(w http.ResponseWriter, _ *http.Request) {
	switch {
	case a.conn == nil || !a.conn.client.IsConnectionOpen():
		http.Error(w, "not connected to the broker", http.StatusServiceUnavailable)
	case a.isFailed():
		http.Error(w, "fence store failed", http.StatusServiceUnavailable)
	default:
		w.Write([]byte("ready\n"))
	}
}

func (a *Agent) isFailed() bool {
	select {
	case <-a.failed:
		return true
	default:
		return false
	}
}

func (a *Agent) listDevices(w http.ResponseWriter, _ *http.Request) {
	out := make([]DeviceStatus, 0, len(a.devices))
	for _, d := range a.devices {
		out = append(out, d.status())
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (d *device) status() DeviceStatus {
	s := DeviceStatus{ID: d.id, Domain: d.domain, Driver: d.cfg.Driver, Queue: d.inbox.len() + d.applyQ.len(), Fence: d.fenceView()}
	d.mu.Lock()
	defer d.mu.Unlock()
	s.Available, s.LastResult = d.available, d.last
	return s
}
