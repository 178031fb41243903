package agent

import (
	_ "embed"
	"html/template"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/buildinfo"
	"github.com/fencegate/fencegate/internal/pagehead"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// AgentStatus is GET /v1/status: everything the status page shows.
type AgentStatus struct {
	Agent   string           `json:"agent"`
	Version string           `json:"version"`
	Build   buildinfo.Info   `json:"build"` // what the binary was built from, as --version prints
	Boot    time.Time        `json:"boot"`
	Broker  BrokerStatus     `json:"broker"`
	Store   StoreStatus      `json:"store"`
	Devices []DeviceStatus   `json:"devices"`
	InDoubt []InDoubtCommand `json:"in_doubt"`
}

// BrokerStatus is the agent's broker connection.
type BrokerStatus struct {
	URL       string `json:"url"`
	Embedded  bool   `json:"embedded"`
	Connected bool   `json:"connected"`
}

// StoreStatus is the fence store's health: Healthy until a commit failed
// (the agent then stops), with the failure in Error.
type StoreStatus struct {
	Path    string `json:"path"`
	Healthy bool   `json:"healthy"`
	Error   string `json:"error,omitempty"`
}

// Status collects the agent's status. Safe for concurrent use.
func (a *Agent) Status() AgentStatus {
	s := AgentStatus{Agent: a.cfg.Agent.ID, Version: Version, Build: buildinfo.Read(), Boot: a.boot.UTC().Truncate(time.Second),
		Broker: BrokerStatus{URL: mqtt.Redact(a.BrokerURL()), Embedded: a.broker != nil, Connected: a.conn != nil && a.conn.client.IsConnectionOpen()},
		Store:  StoreStatus{Path: a.env.store.Path(), Healthy: !a.isFailed()}, Devices: a.deviceStatuses()}
	if !s.Store.Healthy {
		s.Store.Error = a.failErr.Error()
	}
	cmds, err := a.InDoubt()
	if err != nil && s.Store.Healthy {
		s.Store.Error = "reading the in-doubt list: " + err.Error()
	}
	s.InDoubt = cmds
	if s.InDoubt == nil {
		s.InDoubt = []InDoubtCommand{}
	}
	return s
}

func (a *Agent) statusJSON(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, a.Status())
}

//go:embed statuspage.html
var statusPageHTML string

var statusPage = template.Must(template.New("status").Funcs(template.FuncMap{
	"epochDate": epochDate,
	"rfc3339":   func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
}).Parse(statusPageHTML))

// epochDate shows a token epoch (the controller store's creation time in
// Unix ms) as a date, as the page's script does (Date.toISOString).
func epochDate(epoch uint64) string {
	return time.UnixMilli(int64(epoch)).UTC().Format("2006-01-02T15:04:05.000Z")
}

// statusPage serves the read-only HTML status page: rendered on the server
// (html/template escapes every value), then refreshed by a few lines of
// script from /v1/status, which set text only (textContent), never markup.
// The Content-Security-Policy allows that one script and nothing external.
func (a *Agent) statusPage(w http.ResponseWriter, _ *http.Request) {
	nonce := pagehead.Set(w)
	if err := statusPage.Execute(w, struct {
		S     AgentStatus
		Nonce string
	}{a.Status(), nonce}); err != nil {
		a.log.Debug("status page not written", "err", err)
	}
}
