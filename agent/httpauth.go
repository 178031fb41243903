package agent

import (
	"log/slog"
	"mime"
	"net/http"
	"net/url"

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
// served. Either way a request a web page could have made the operator's
// browser send is refused (crossSite), since the browser is a loopback
// client whenever it runs on the gateway or reaches it through an ssh
// tunnel.
func (a *Agent) operatorOnly(next http.HandlerFunc) http.HandlerFunc {
	guarded := next
	if a.httpAuth != nil {
		guarded = a.httpAuth.Middleware(next).ServeHTTP
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if why := crossSite(r, a.httpAuth == nil); why != "" {
			http.Error(w, "operator endpoint: "+why, http.StatusForbidden)
			return
		}
		if a.httpAuth == nil && !httpauth.IsLoopback(r.RemoteAddr) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="fencegate-agent"`)
			http.Error(w, "operator endpoints answer loopback clients only (set http.token_file to allow others)", http.StatusUnauthorized)
			return
		}
		guarded(w, r)
	}
}

// crossSite returns why r may come from a web page rather than an
// operator's tool ("" if it does not): a browser's cross-site fetch
// metadata or an Origin of another host; a POST whose body is not declared
// JSON (a page can send text/plain without a preflight); and, when only
// loopback clients are trusted (loopbackOnly), a Host that is not a
// loopback name (a DNS-rebinding page reaches 127.0.0.1 under its own name).
func crossSite(r *http.Request, loopbackOnly bool) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return "refused: a cross-site browser request (Sec-Fetch-Site " + site + ")"
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if u, err := url.Parse(origin); err != nil || u.Host != r.Host {
			return "refused: Origin " + origin + " is not this agent"
		}
	}
	if r.Method == http.MethodPost {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			return "the body must be sent as Content-Type: application/json"
		}
	}
	if loopbackOnly && !httpauth.IsLoopback(r.Host) {
		return "refused: Host " + r.Host + " is not a loopback name (set http.token_file to serve other names)"
	}
	return ""
}
