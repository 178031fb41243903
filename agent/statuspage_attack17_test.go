package agent

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/fencegate/fencegate/transport/mqtt"
)

// Attack (issue 17a, status pages): the agent's broker URL may carry the
// MQTT credentials as user info (tcp://user:password@host:port — paho uses
// them as user name and password; transport/mqtt itself builds such URLs
// and documents them as "a credential: never log it"). The status page
// (GET /) and its data (GET /v1/status) are read-only endpoints served to
// whoever reaches the HTTP listener — without the operator token — and
// they print the configured broker URL verbatim, password included.
//
// Fails on the current code: the password is in both answers.
func TestAttack17StatusPageLeaksBrokerPassword(t *testing.T) {
	const secret = "s3cret-broker-pw"
	h := newHarness(t, "pump1")
	hash, err := bcrypt.GenerateFromPassword([]byte(secret), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	b, err := mqtt.StartEmbeddedWith(mqtt.EmbeddedOptions{Addr: "127.0.0.1:0", Users: map[string][]byte{"agent-gw1": hash}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	u, err := url.Parse(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("agent-gw1", secret) // the broker admits only this user
	h.cfg.MQTT.Broker = u.String()
	a, err := New(h.cfg.WithDefaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	base := "http://" + a.HTTPAddr()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var s AgentStatus
		if resp, err := http.Get(base + "/v1/status"); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&s)
			resp.Body.Close()
		}
		if s.Broker.Connected {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("agent did not connect to the broker with the URL's credentials")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, path := range []string{"/", "/v1/status"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		if strings.Contains(string(body), secret) {
			t.Errorf("GET %s (served without the operator token) shows the broker password %q from mqtt.broker's user info", path, secret)
		}
	}
}
