package agent

import (
	"log/slog"
	"net/http"

	"github.com/fencegate/fencegate/internal/httpauth"
)

// loadHTTPAuth reads http.token_file with the controller's HTTP
// authentication (internal/httpauth: one token a line, "name:token" or a
// bare token, at least 16 characters): the credentials of the operator
// endpoints. An empty path means none (nil, nil).
func loadHTTPAuth(path string, log *slog.Logger) (*httpauth.Authenticator, error) {
	return httpauth.New(httpauth.Config{TokenFile: path}, "http", log)
}

// operatorOnly guards the endpoints that change state or hand out the
// whole store: with a token file, a request must carry
// "Authorization: Bearer <token>" (its name is then the caller's identity,
// httpauth.Identity); without one, only clients on a loopback address are
// served.
func (a *Agent) operatorOnly(next http.HandlerFunc) http.HandlerFunc {
	if a.httpAuth != nil {
		return a.httpAuth.Middleware(next).ServeHTTP
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if !httpauth.IsLoopback(r.RemoteAddr) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="fencegate-agent"`)
			http.Error(w, "operator endpoints answer loopback clients only (set http.token_file to allow others)", http.StatusUnauthorized)
			return
		}
		next(w, r)
	}
}
