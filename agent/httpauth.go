package agent

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
)

// loadHTTPToken reads http.token_file: the bearer token of the operator
// endpoints. An empty path means none (nil, nil).
func loadHTTPToken(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("http.token_file: %w", err)
	}
	tok := bytes.TrimSpace(b)
	if len(tok) < 16 || bytes.ContainsAny(tok, " \t\r\n") {
		return nil, fmt.Errorf("http.token_file: %q must hold one token of at least 16 characters, without spaces", path)
	}
	return tok, nil
}

// operatorOnly guards the endpoints that change state or hand out the
// whole store: with a token file, a request must carry
// "Authorization: Bearer <token>"; without one, only clients on a loopback
// address are served.
func (a *Agent) operatorOnly(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := a.authorize(r); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="fencegate-agent"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		next(w, r)
	}
}

func (a *Agent) authorize(r *http.Request) error {
	if a.httpTok == nil {
		if !isLoopback(r.RemoteAddr) {
			return fmt.Errorf("operator endpoints answer loopback clients only (set http.token_file to allow others)")
		}
		return nil
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), a.httpTok) != 1 {
		return fmt.Errorf("missing or wrong bearer token (http.token_file)")
	}
	return nil
}

func isLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}
