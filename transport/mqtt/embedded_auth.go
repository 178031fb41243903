package mqtt

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"golang.org/x/crypto/bcrypt"
)

// ErrAnonymousExposed: an embedded broker on an address that is not
// loopback would let anyone in — no password file, no client
// certificates and anonymous clients not explicitly allowed.
var ErrAnonymousExposed = errors.New("mqtt: embedded broker on a non-loopback address without credentials")

// internalUser is the user name of the in-process clients on the
// embedded broker's internal listener; its password is random per start.
const internalUser = "fencegate-internal"

// internalListener is the id of the internal listener.
const internalListener = "fencegate-internal"

// authHook admits clients of the embedded broker: a verified client
// certificate, a user of the password file with the right password, the
// in-process clients on the internal listener with the per-start secret,
// or — only where allowed — anonymous clients. It allows every topic to
// an admitted client (ACLs belong on a shared broker).
type authHook struct {
	mochi.HookBase
	users     map[string][]byte // bcrypt hashes by user name; read-only
	anonymous bool              // a client without user name and certificate is admitted
	secret    []byte            // the internal listener's password
	log       *slog.Logger
}

func (h *authHook) ID() string { return "fencegate-auth" }

func (h *authHook) Provides(b byte) bool {
	return b == mochi.OnConnectAuthenticate || b == mochi.OnACLCheck
}

// OnConnectAuthenticate decides one CONNECT; a refusal is logged.
func (h *authHook) OnConnectAuthenticate(cl *mochi.Client, pk packets.Packet) bool {
	ok, who := h.admit(cl, pk)
	if !ok {
		h.log.Warn("embedded broker refused a client", "remote", cl.Net.Remote, "client_id", cl.ID, "user", string(pk.Connect.Username))
		return false
	}
	h.log.Debug("embedded broker admitted a client", "remote", cl.Net.Remote, "client_id", cl.ID, "as", who)
	return true
}

func (h *authHook) admit(cl *mochi.Client, pk packets.Packet) (bool, string) {
	user, pass := string(pk.Connect.Username), pk.Connect.Password
	if cl.Net.Listener == internalListener {
		return user == internalUser && subtle.ConstantTimeCompare(pass, h.secret) == 1, "internal"
	}
	if id := connIdentity(cl.Net.Conn); id != "" {
		return true, "certificate " + id
	}
	if hash, ok := h.users[user]; ok && user != "" {
		return bcrypt.CompareHashAndPassword(hash, pass) == nil, "user " + user
	}
	return user == "" && h.anonymous, "anonymous"
}

// OnACLCheck allows every topic to an admitted client.
func (h *authHook) OnACLCheck(*mochi.Client, string, bool) bool { return true }

// connIdentity is the identity of a verified client certificate on conn.
func connIdentity(conn net.Conn) string {
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return ""
	}
	cs := tc.ConnectionState()
	return PeerIdentity(&cs)
}

// requiresAuth reports whether the options admit only authenticated
// clients (users or client certificates) on the public listener.
func (o EmbeddedOptions) requiresAuth() bool {
	return len(o.Users) > 0 || (o.TLS != nil && o.TLS.ClientAuth == tls.RequireAndVerifyClientCert)
}

// checkExposure refuses an anonymous broker on a non-loopback address
// unless AllowAnonymous, and warns about one that is allowed.
func (o EmbeddedOptions) checkExposure(log *slog.Logger) error {
	if o.requiresAuth() || IsLoopback(o.Addr) {
		return nil
	}
	if !o.AllowAnonymous {
		return fmt.Errorf("%w: %s", ErrAnonymousExposed, o.Addr)
	}
	log.Warn("embedded broker admits anonymous clients on a non-loopback address: anyone who reaches it can publish commands and grants",
		"addr", o.Addr)
	return nil
}

// IsLoopback reports whether the host of addr ("host:port") is a loopback
// address or "localhost"; an empty host (every interface) is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func newSecret() ([]byte, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("embedded broker: internal secret: %w", err)
	}
	return []byte(hex.EncodeToString(b)), nil
}

// LoadPasswordFile reads a password file: one "user:hash" a line, the hash
// bcrypt ($2a$, $2b$ or $2y$, as `htpasswd -nB user` writes); blank lines
// and lines starting with # are skipped. Errors name the file and line.
func LoadPasswordFile(path string) (map[string][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("password file: %w", err)
	}
	users := map[string][]byte{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := addUser(users, line); err != nil {
			return nil, fmt.Errorf("password file %s line %d: %w", path, n, err)
		}
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("password file %s: no users", path)
	}
	return users, nil
}

func addUser(users map[string][]byte, line string) error {
	user, hash, ok := strings.Cut(line, ":")
	if !ok || user == "" {
		return errors.New(`not "user:bcrypt-hash"`)
	}
	if _, err := bcrypt.Cost([]byte(hash)); err != nil {
		return fmt.Errorf("user %q: hash is not bcrypt: %w", user, err)
	}
	if user == internalUser {
		return fmt.Errorf("user %q is reserved", user)
	}
	if _, dup := users[user]; dup {
		return fmt.Errorf("user %q appears twice", user)
	}
	users[user] = []byte(hash)
	return nil
}

// Redact is broker with any password in its user info replaced by "xxxxx",
// for logs (InternalURL carries a secret).
func Redact(broker string) string {
	u, err := url.Parse(broker)
	if err != nil {
		return "(unparsable broker URL)"
	}
	return u.Redacted()
}
