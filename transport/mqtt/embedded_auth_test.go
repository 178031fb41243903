package mqtt

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/crypto/bcrypt"

	"github.com/fencegate/fencegate/internal/logtest"
	"github.com/fencegate/fencegate/internal/tlstest"
)

// tryConnect makes one connection attempt with cfg and returns its outcome.
func tryConnect(t *testing.T, cfg Config) error {
	t.Helper()
	cfg.ConnectTimeout = 5 * time.Second
	opts, err := cfg.ClientOptions(nil)
	if err != nil {
		return err
	}
	c := paho.NewClient(opts.SetConnectRetry(false).SetAutoReconnect(false))
	err = Wait(c.Connect(), 10*time.Second)
	if err == nil {
		c.Disconnect(0)
	}
	return err
}

func TestEmbeddedRefusesAnonymousOffLoopback(t *testing.T) {
	_, err := StartEmbeddedWith(EmbeddedOptions{Addr: "0.0.0.0:0"})
	if !errors.Is(err, ErrAnonymousExposed) {
		t.Fatalf("err = %v, want ErrAnonymousExposed", err)
	}
	rec := logtest.New()
	b, err := StartEmbeddedWith(EmbeddedOptions{Addr: "0.0.0.0:0", AllowAnonymous: true, Logger: rec.Logger()})
	if err != nil {
		t.Fatalf("allowed anonymous: %v", err)
	}
	defer b.Close()
	if len(rec.Matching(map[string]string{"level": "WARN", "addr": "0.0.0.0:0"})) == 0 {
		t.Fatalf("no warning about the anonymous exposed broker:\n%s", rec.Dump())
	}
	url := "tcp://127.0.0.1:" + b.Addr()[strings.LastIndex(b.Addr(), ":")+1:]
	if err := tryConnect(t, Config{Broker: url, ClientID: "anon"}); err != nil {
		t.Fatalf("anonymous client on an allowed broker: %v", err)
	}
}

func writePasswordFile(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func bcryptLine(t *testing.T, user, pass string) string {
	h, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return user + ":" + string(h)
}

func TestEmbeddedPasswordFile(t *testing.T) {
	users, err := LoadPasswordFile(writePasswordFile(t, "# users", bcryptLine(t, "sup", "s3cret"), "", bcryptLine(t, "ops", "other")))
	if err != nil {
		t.Fatal(err)
	}
	b, err := StartEmbeddedWith(EmbeddedOptions{Addr: "0.0.0.0:0", Users: users})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	url := "tcp://127.0.0.1:" + b.Addr()[strings.LastIndex(b.Addr(), ":")+1:]
	tests := []struct {
		name, user, pass string
		ok               bool
	}{
		{"right password", "sup", "s3cret", true},
		{"wrong password", "sup", "nope", false},
		{"another user's password", "ops", "s3cret", false},
		{"unknown user", "eve", "s3cret", false},
		{"anonymous", "", "", false},
		{"internal user name on the public listener", internalUser, "x", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tryConnect(t, Config{Broker: url, ClientID: "c-" + tc.user, Username: tc.user, Password: tc.pass})
			if (err == nil) != tc.ok {
				t.Fatalf("connect: err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	if err := tryConnect(t, Config{Broker: b.InternalURL(), ClientID: "internal"}); err != nil {
		t.Fatalf("internal URL: %v", err)
	}
	if b.InternalURL() == b.URL() {
		t.Fatal("a broker needing credentials has no internal listener")
	}
}

func TestLoadPasswordFileErrorsNameLine(t *testing.T) {
	tests := []struct{ name, line, want string }{
		{"no colon", "sup", "line 1"},
		{"plain password", "sup:secret", "not bcrypt"},
		{"reserved", bcryptLine(t, internalUser, "x"), "reserved"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadPasswordFile(writePasswordFile(t, tc.line))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestEmbeddedMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "plant")
	srv := ca.Server("broker")
	st := ServerTLS{Cert: srv.Cert, Key: srv.Key, ClientCA: ca.CAFile}
	tc, err := st.Config("mqtt.server_tls")
	if err != nil {
		t.Fatal(err)
	}
	b, err := StartEmbeddedWith(EmbeddedOptions{Addr: "0.0.0.0:0", TLS: tc})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	url := "ssl://localhost:" + b.Addr()[strings.LastIndex(b.Addr(), ":")+1:]
	good := ca.Client("line1-supervisor")
	other := tlstest.NewCA(t, "elsewhere").Client("line1-supervisor")
	tests := []struct {
		name string
		tls  TLS
		ok   bool
	}{
		{"client certificate of the CA", TLS{CA: ca.CAFile, Cert: good.Cert, Key: good.Key}, true},
		{"no client certificate", TLS{CA: ca.CAFile}, false},
		{"certificate of another CA", TLS{CA: ca.CAFile, Cert: other.Cert, Key: other.Key}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tryConnect(t, Config{Broker: url, ClientID: "c", TLS: tc.tls})
			if (err == nil) != tc.ok {
				t.Fatalf("connect: err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	if err := tryConnect(t, Config{Broker: b.InternalURL(), ClientID: "internal"}); err != nil {
		t.Fatalf("internal URL: %v", err)
	}
}
