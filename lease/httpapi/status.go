package httpapi

import (
	"context"
	_ "embed"
	"html/template"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/lease"

	"github.com/fencegate/fencegate/internal/pagehead"
)

// StatusLister is the optional capability of a Controller behind the
// status page: *lease.Controller implements it. Safe for concurrent use.
type StatusLister interface {
	DomainStatuses(ctx context.Context) ([]lease.DomainStatus, error)
}

// Status is GET /v1/status: what the controller's status page shows.
type Status struct {
	Epoch   uint64               `json:"epoch"`
	Ready   bool                 `json:"ready"`
	Problem string               `json:"problem,omitempty"` // why not ready, or why domains cannot be listed
	Domains []lease.DomainStatus `json:"domains"`
}

func (h *handler) status(ctx context.Context) Status {
	s := Status{Epoch: h.cfg.Controller.Epoch(), Ready: true, Domains: []lease.DomainStatus{}}
	if h.cfg.Ready != nil {
		if err := h.cfg.Ready(); err != nil {
			s.Ready, s.Problem = false, err.Error()
		}
	}
	sl, ok := h.cfg.Controller.(StatusLister)
	if !ok {
		s.Problem = lease.ErrNotScannable.Error()
		return s
	}
	ds, err := sl.DomainStatuses(ctx)
	if err != nil {
		s.Problem = err.Error()
		return s
	}
	if ds != nil {
		s.Domains = ds
	}
	return s
}

func (h *handler) statusJSON(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, h.status(r.Context()))
}

//go:embed status.html
var statusHTML string

var statusPage = template.Must(template.New("status").Funcs(template.FuncMap{
	"epochDate": epochDate,
	"left": func(ms int64) string {
		return (time.Duration(ms) * time.Millisecond).Round(100 * time.Millisecond).String()
	},
}).Parse(statusHTML))

// epochDate shows a token epoch (Unix ms) as a date, as the page's script
// does (Date.toISOString).
func epochDate(epoch uint64) string {
	if epoch == 0 {
		return "—"
	}
	return time.UnixMilli(int64(epoch)).UTC().Format("2006-01-02T15:04:05.000Z")
}

// statusPageHandler serves the read-only HTML status page: rendered with
// html/template, refreshed by a few lines of script from /v1/status that
// set text only (textContent). The Content-Security-Policy allows that one
// script and nothing external.
func (h *handler) statusPageHandler(w http.ResponseWriter, r *http.Request) {
	nonce := pagehead.Set(w)
	if err := statusPage.Execute(w, struct {
		S     Status
		Nonce string
	}{h.status(r.Context()), nonce}); err != nil {
		h.log.Debug("status page not written", "err", err)
	}
}
