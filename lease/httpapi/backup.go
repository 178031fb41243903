package httpapi

import (
	"io"
	"net"
	"net/http"
	"strconv"

	"github.com/fencegate/fencegate/internal/httpauth"
)

// Backuper writes a consistent copy of the controller's store while it
// serves (*boltstore.Store implements it): onSize gets the size before the
// first byte. Safe for concurrent use.
type Backuper interface {
	Backup(w io.Writer, onSize func(int64)) (int64, error)
}

// backup streams the store copy (GET /v1/backup). It is served to loopback
// clients only: the copy holds every domain's record, and the controller's
// HTTP authentication is not this handler's to decide (a middleware in
// front of New may add it; see docs/operations.md).
func (h *handler) backup(w http.ResponseWriter, r *http.Request) {
	if !loopback(r.RemoteAddr) {
		http.Error(w, "backup is served to loopback clients only", http.StatusForbidden)
		return
	}
	if h.cfg.Auth == nil && !httpauth.IsLoopback(r.Host) { // a DNS-rebinding page reaches 127.0.0.1 under its own name
		http.Error(w, "backup is served under a loopback host name only (Host "+r.Host+")", http.StatusForbidden)
		return
	}
	if h.cfg.Backup == nil {
		http.Error(w, "this store has no online backup (etcd: use etcdctl snapshot save)", http.StatusNotImplemented)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	size := func(n int64) { w.Header().Set("Content-Length", strconv.FormatInt(n, 10)) }
	if n, err := h.cfg.Backup.Backup(w, size); err != nil {
		h.log.Warn("backup cut short", "bytes", n, "err", err)
		return
	}
	h.log.Info("backup served")
}

func loopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}
