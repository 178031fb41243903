package httpauth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
)

// Errors of the package.
var (
	// ErrUnauthenticated: the request carried no valid credential.
	ErrUnauthenticated = errors.New("httpauth: no valid client certificate or bearer token")
	// ErrExposed: a non-loopback listener with no authentication
	// configured and unauthenticated access not explicitly allowed.
	ErrExposed = errors.New("httpauth: non-loopback listener without authentication")
)

// Config is an HTTP server's authentication block (YAML). Zero value: no
// TLS, no tokens — every request is anonymous.
type Config struct {
	// TokenFile holds bearer tokens, one "name:token" a line (name is the
	// identity; a line without ":" is a token named "bearer"); blank lines
	// and # comments are skipped.
	TokenFile string `yaml:"token_file"`
	// TLS makes the server serve TLS; with client_ca a verified client
	// certificate authenticates its subject common name.
	TLS ServerTLS `yaml:"tls"`
	// AllowUnauthenticated lets a non-loopback listener run with neither
	// tokens nor client certificates. Default false.
	AllowUnauthenticated bool `yaml:"allow_unauthenticated"`
}

// ServerTLS names the PEM files of a TLS listener; ClientCA, if set, is
// the bundle client certificates are verified against.
type ServerTLS struct {
	Cert     string `yaml:"cert"`
	Key      string `yaml:"key"`
	ClientCA string `yaml:"client_ca"`
}

// Enabled reports whether c authenticates anyone (tokens or client certs).
func (c Config) Enabled() bool { return c.TokenFile != "" || c.TLS.ClientCA != "" }

// Validate checks c for a listener on addr; errors name the key under
// prefix (e.g. "http_auth") and the value.
func (c Config) Validate(prefix, addr string) error {
	t := c.TLS
	if (t.Cert == "") != (t.Key == "") {
		return fmt.Errorf("%s.tls: cert %q and key %q must be given together", prefix, t.Cert, t.Key)
	}
	if t.ClientCA != "" && t.Cert == "" {
		return fmt.Errorf("%s.tls.client_ca: %q needs cert and key (a TLS listener)", prefix, t.ClientCA)
	}
	if !c.Enabled() && !c.AllowUnauthenticated && !IsLoopback(addr) {
		return fmt.Errorf("%w: %s on %q: set %s.token_file or %s.tls.client_ca, or %s.allow_unauthenticated: true",
			ErrExposed, prefix, addr, prefix, prefix, prefix)
	}
	return nil
}

// IsLoopback reports whether addr's host is loopback or "localhost".
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// DefaultHost gives a host-less listen address (":8480") the loopback
// host, so that binding every interface takes an explicit "0.0.0.0:8480".
func DefaultHost(addr string) string {
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}

// ServerConfig is the TLS configuration of c's listener, nil without TLS.
// Client certificates are asked for and verified when given, not
// required: open endpoints stay reachable, Middleware demands identity.
func (c Config) ServerConfig(prefix string) (*tls.Config, error) {
	if c.TLS.Cert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.TLS.Cert, c.TLS.Key)
	if err != nil {
		return nil, fmt.Errorf("%s.tls.cert: %w", prefix, err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if c.TLS.ClientCA != "" {
		pem, err := os.ReadFile(c.TLS.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("%s.tls.client_ca: %w", prefix, err)
		}
		tc.ClientCAs = x509.NewCertPool()
		if !tc.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.tls.client_ca: %q holds no PEM certificate", prefix, c.TLS.ClientCA)
		}
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return tc, nil
}

// Authenticator checks requests. Safe for concurrent use; read-only.
type Authenticator struct {
	tokens map[[32]byte]string // sha256 of a token → its identity
	certs  bool                // verified client certificates authenticate
	log    *slog.Logger
}

// New builds c's Authenticator, reading the token file; nil if c
// authenticates nobody (every request then passes as anonymous). log may
// be nil.
func New(c Config, prefix string, log *slog.Logger) (*Authenticator, error) {
	if !c.Enabled() {
		return nil, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Authenticator{tokens: map[[32]byte]string{}, certs: c.TLS.ClientCA != "", log: log}
	if c.TokenFile != "" {
		if err := a.loadTokens(c.TokenFile); err != nil {
			return nil, fmt.Errorf("%s.token_file: %w", prefix, err)
		}
	}
	return a, nil
}

func (a *Authenticator) loadTokens(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, tok, ok := strings.Cut(line, ":")
		if !ok {
			name, tok = "bearer", line
		}
		if len(tok) < 16 || name == "" {
			return fmt.Errorf("%s line %d: want \"name:token\" with a token of at least 16 characters", path, n)
		}
		a.tokens[sha256.Sum256([]byte(tok))] = name
	}
	if len(a.tokens) == 0 {
		return fmt.Errorf("%s: no tokens", path)
	}
	return nil
}

// Identify returns the identity r authenticates as, or ErrUnauthenticated.
// A verified client certificate wins over a bearer token.
func (a *Authenticator) Identify(r *http.Request) (string, error) {
	if a.certs && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		if cn := r.TLS.PeerCertificates[0].Subject.CommonName; cn != "" {
			return cn, nil
		}
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && len(a.tokens) > 0 {
		return a.lookup(tok)
	}
	return "", ErrUnauthenticated
}

// lookup finds tok's identity; every stored token is compared, in
// constant time, so timing tells nothing of which one nearly matched.
func (a *Authenticator) lookup(tok string) (string, error) {
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	found := ""
	for k, name := range a.tokens {
		if subtle.ConstantTimeCompare(k[:], sum[:]) == 1 {
			found = name
		}
	}
	if found == "" {
		return "", ErrUnauthenticated
	}
	return found, nil
}

type ctxKey struct{}

// Identity is the identity Middleware stored in ctx: ("", false) for a
// request that did not pass through an Authenticator.
func Identity(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(ctxKey{}).(string)
	return id, ok
}

// Middleware answers 401 with a JSON body {"code":"unauthorized",
// "message":…} (and a log line) to a request without a valid credential,
// and passes the others to next with their identity in the context. A nil
// Authenticator passes every request unchanged.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	if a == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := a.Identify(r)
		if err != nil {
			a.log.Warn("http request refused: not authenticated", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("WWW-Authenticate", `Bearer realm="fencegate"`)
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"code": "unauthorized", "message": err.Error()})
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, id)))
	})
}

// ClientToken reads the bearer token a client sends from the token file at
// path, in the format the server reads: the first line that is not empty
// or a comment, "name:token" or a bare token (surrounding white space
// dropped). An empty path gives "" (no token).
func ClientToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, tok, ok := strings.Cut(line, ":"); ok {
			return strings.TrimSpace(tok), nil
		}
		return line, nil
	}
	return "", fmt.Errorf("%s: no token", path)
}
