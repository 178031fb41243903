// Package httpapi serves a lease controller over HTTP JSON: the lease
// operations, the controller's public keys, health, readiness and metrics.
//
//	POST /v1/leases/{domain}/acquire|renew|release   body: protocol.Request
//	GET  /v1/leases/{domain}                         (get)
//	GET  /v1/keys                                    public keys with key ids
//	GET  /healthz, /readyz, /metrics
//	GET  /, /v1/status                               status page (HTML) and its data
//	GET  /v1/backup                                  a consistent copy of the bbolt store
//
// With an Authenticator (Config.Auth) the lease endpoints need a client
// certificate or a bearer token (401 otherwise); with a Policy
// (Config.Policy) the identity decides which domains and holder names it
// may use. /v1/keys, /healthz, /readyz and /metrics stay open.
//
// Responses are protocol.Response. Status: 200 when ok, 409 for held,
// not_holder and expired, 400 for bad input (with a JSON body), 503 for
// busy, 500 for internal errors.
package httpapi

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/httpauth"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/protocol"
)

// Controller is what the handler serves; *lease.Controller implements it.
// Methods are called concurrently.
type Controller interface {
	Do(ctx context.Context, op protocol.LeaseOp, domain string, req protocol.Request) protocol.Response
	Keys() []ed25519.PublicKey
	Epoch() uint64
}

// Config configures the handler. Controller is required.
type Config struct {
	Controller Controller
	// Ready reports whether the controller can serve (store healthy, broker
	// connected); nil means always ready. /readyz answers 503 otherwise.
	Ready func() error
	// Metrics serves /metrics; nil leaves the path unserved.
	Metrics http.Handler
	// Auth, if set, authenticates the lease endpoints' clients.
	Auth *httpauth.Authenticator
	// Policy, if not empty, decides who may use which domain; it needs
	// Auth (without it every request is unauthenticated and refused).
	Policy Policy
	Logger *slog.Logger
	// Backup serves GET /v1/backup (backup.go); nil answers 501.
	Backup Backuper
}

// New returns the controller's HTTP handler.
func New(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{cfg: cfg, log: cfg.Logger.With("component", "http")}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/leases/{domain}/{op}", cfg.Auth.Middleware(http.HandlerFunc(h.operate)))
	mux.Handle("GET /v1/leases/{domain}", cfg.Auth.Middleware(http.HandlerFunc(h.get)))
	mux.HandleFunc("GET /v1/keys", h.keys)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", h.ready)
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics)
	}
	mux.HandleFunc("GET /{$}", h.statusPageHandler) // status.go
	mux.HandleFunc("GET /v1/status", h.statusJSON)
	mux.Handle("GET /v1/backup", cfg.Auth.Middleware(http.HandlerFunc(h.backup))) // backup.go: authenticated like the lease endpoints, and loopback only
	return mux
}

type handler struct {
	cfg Config
	log *slog.Logger
}

func (h *handler) operate(w http.ResponseWriter, r *http.Request) {
	domain := r.PathValue("domain")
	op, err := protocol.ParseLeaseOp(r.PathValue("op"))
	if err == nil && op == protocol.OpGet {
		err = fmt.Errorf("%w: get is GET /v1/leases/{domain}", lease.ErrBadRequest)
	}
	var req protocol.Request
	if err == nil {
		req, err = decodeBody(w, r)
	}
	if err != nil {
		h.badRequest(w, r, err)
		return
	}
	req.ReplyTo = "" // meaningless over HTTP
	h.do(w, r, op, domain, req)
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	req := protocol.Request{RequestID: r.URL.Query().Get("request_id")}
	h.do(w, r, protocol.OpGet, r.PathValue("domain"), req)
}

// do asks the policy, then the controller.
func (h *handler) do(w http.ResponseWriter, r *http.Request, op protocol.LeaseOp, domain string, req protocol.Request) {
	id, ok := httpauth.Identity(r.Context())
	if err := h.cfg.Policy.Allow(id, ok, op, domain, req); err != nil {
		h.log.Warn("lease request refused by the authz policy", "op", op, "domain", domain, "identity", id, "err", err)
		writeJSON(w, http.StatusForbidden, refusal(err))
		return
	}
	h.respond(w, r, h.cfg.Controller.Do(r.Context(), op, domain, req))
}

// decodeBody reads at most protocol.MaxRequestBytes of JSON.
func decodeBody(w http.ResponseWriter, r *http.Request) (protocol.Request, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, protocol.MaxRequestBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return protocol.Request{}, fmt.Errorf("%w: body is over %d bytes", lease.ErrBadRequest, protocol.MaxRequestBytes)
	}
	if err != nil {
		return protocol.Request{}, fmt.Errorf("%w: read body: %w", lease.ErrBadRequest, err)
	}
	return protocol.DecodeRequest(body)
}

func (h *handler) badRequest(w http.ResponseWriter, r *http.Request, err error) {
	h.respond(w, r, lease.BadRequest(err))
}

func (h *handler) respond(w http.ResponseWriter, r *http.Request, resp protocol.Response) {
	if resp.Code == protocol.CodeBadRequest {
		h.log.Warn("bad request", "method", r.Method, "path", r.URL.Path, "err", resp.Message)
	}
	writeJSON(w, status(resp), resp)
}

// status maps a response to its HTTP status.
func status(resp protocol.Response) int {
	switch {
	case resp.OK:
		return http.StatusOK
	case resp.Code == protocol.CodeBadRequest:
		return http.StatusBadRequest
	case resp.Code == protocol.CodeInternal:
		return http.StatusInternalServerError
	case resp.Code == protocol.CodeBusy:
		return http.StatusServiceUnavailable
	}
	return http.StatusConflict
}

// Key is one entry of GET /v1/keys.
type Key struct {
	ID        string `json:"key_id"`
	Algorithm string `json:"alg"`        // "Ed25519"
	Public    string `json:"public_key"` // PEM (PKIX), as in controller.pub
	Signing   bool   `json:"signing"`    // the key new tokens are signed with
}

func (h *handler) keys(w http.ResponseWriter, _ *http.Request) {
	var out struct {
		Epoch uint64 `json:"epoch"`
		Keys  []Key  `json:"keys"`
	}
	out.Epoch = h.cfg.Controller.Epoch()
	for i, k := range h.cfg.Controller.Keys() {
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			h.log.Error("encode public key", "err", err)
			writeJSON(w, http.StatusInternalServerError, protocol.Response{Code: protocol.CodeInternal})
			return
		}
		out.Keys = append(out.Keys, Key{ID: fence.KeyIDOf(k).String(), Algorithm: "Ed25519",
			Public: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), Signing: i == 0})
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) ready(w http.ResponseWriter, _ *http.Request) {
	if h.cfg.Ready != nil {
		if err := h.cfg.Ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	io.WriteString(w, "ready\n")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
