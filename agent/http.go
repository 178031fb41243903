package agent

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/httpauth"
	"github.com/fencegate/fencegate/persist"
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
	// InDoubt counts the device's open in-doubt commands (GET /v1/indoubt).
	InDoubt int `json:"in_doubt"`
}

// The agent's HTTP API. Read-only endpoints are open to whoever reaches the
// listener (127.0.0.1 by default); the operator endpoints — resolving an
// in-doubt command, backup — go through operatorOnly (httpauth.go).
//
//	GET  /                                    status page (HTML)
//	GET  /v1/status                           the status page's data (JSON)
//	GET  /v1/devices                          []DeviceStatus
//	GET  /v1/indoubt                          []InDoubtCommand
//	POST /v1/indoubt/{device}/{id}/resolve    body Resolution → protocol.Result
//	GET  /v1/backup                           a consistent copy of fence.db
//	GET  /healthz, /readyz, /metrics
func (a *Agent) serveHTTP() *http.Server {
	if a.httpLn == nil {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.env.m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /v1/devices", a.listDevices)
	mux.HandleFunc("GET /{$}", a.statusPage)
	mux.HandleFunc("GET /v1/status", a.statusJSON)
	mux.HandleFunc("GET /v1/indoubt", a.listInDoubt)
	mux.HandleFunc("POST /v1/indoubt/{device}/{id}/resolve", a.operatorOnly(a.resolve))
	mux.HandleFunc("GET /v1/backup", a.operatorOnly(a.backup))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
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
	writeJSON(w, http.StatusOK, a.deviceStatuses())
}

// deviceStatuses returns every device's status; in-doubt counts that
// cannot be read (a failed store) show as 0, and the store's health says
// why.
func (a *Agent) deviceStatuses() []DeviceStatus {
	counts, _ := a.env.store.InDoubtCounts()
	out := make([]DeviceStatus, 0, len(a.devices))
	for _, d := range a.devices {
		s := d.status()
		s.InDoubt = counts[d.id]
		out = append(out, s)
	}
	return out
}

func (d *device) status() DeviceStatus {
	s := DeviceStatus{ID: d.id, Domain: d.domain, Driver: d.cfg.Driver, Queue: d.inbox.len() + d.applyQ.len(), Fence: d.fenceView()}
	d.mu.Lock()
	defer d.mu.Unlock()
	s.Available, s.LastResult = d.available, d.last
	return s
}

func (a *Agent) listInDoubt(w http.ResponseWriter, _ *http.Request) {
	cmds, err := a.InDoubt()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, cmds)
}

// resolve answers 200 with the result retries get from now on, 400 for a
// bad body, 404 for an unknown device, 409 for a command not open in doubt.
func (a *Agent) resolve(w http.ResponseWriter, r *http.Request) {
	var res Resolution
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if id, ok := httpauth.Identity(r.Context()); ok {
		res.By += " (authenticated as " + id + ")" // the token's name: who the journal names is not only self-declared
	}
	out, err := a.Resolve(r.Context(), r.PathValue("device"), r.PathValue("id"), res)
	switch {
	case errors.Is(err, ErrUnknownDevice):
		writeError(w, http.StatusNotFound, err)
	case errors.Is(err, persist.ErrNotInDoubt):
		writeError(w, http.StatusConflict, err)
	case errors.Is(err, persist.ErrInvalid):
		writeError(w, http.StatusBadRequest, err)
	case err != nil:
		writeError(w, http.StatusInternalServerError, err)
	default:
		writeJSON(w, http.StatusOK, out)
	}
}

// backup streams a consistent copy of the fence store (persist.Backup).
// A failure after the first byte can only cut the stream short: the client
// checks the copy (persist.Inspect) before it trusts it.
func (a *Agent) backup(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="fence.db"`)
	size := func(n int64) { w.Header().Set("Content-Length", strconv.FormatInt(n, 10)) }
	if n, err := a.env.store.Backup(w, size); err != nil {
		a.log.Warn("backup cut short", "bytes", n, "err", err)
		return
	}
	a.log.Info("backup served")
}

// ErrorBody is the JSON body of an HTTP error answer.
type ErrorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, ErrorBody{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
