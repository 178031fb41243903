package agent

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/buildinfo"
)

// AgentStatus is GET /v1/status: who the agent is, what it was built from,
// and whether it is connected and its store healthy.
type AgentStatus struct {
	ID        string         `json:"id"`
	Build     buildinfo.Info `json:"build"`
	Boot      string         `json:"boot"` // RFC 3339
	Connected bool           `json:"connected"`
	StoreOK   bool           `json:"store_ok"`
	Devices   int            `json:"devices"`
}

func (a *Agent) serveStatus(w http.ResponseWriter, _ *http.Request) {
	s := AgentStatus{ID: a.cfg.Agent.ID, Build: buildinfo.Read(), Boot: a.boot.UTC().Format(time.RFC3339),
		Connected: a.conn != nil && a.conn.client.IsConnectionOpen(), StoreOK: !a.isFailed(), Devices: len(a.devices)}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s)
}
