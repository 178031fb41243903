package mqtt

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// DescribeSessions names each client with its subscriptions and whether
// the topic index delivers them.
func TestDescribeSessions(t *testing.T) {
	b, err := StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, Config{Broker: "tcp://" + b.Addr(), ClientID: "watcher"},
		map[string]paho.MessageHandler{"a/+/c": func(paho.Client, paho.Message) {}, "d/#": func(paho.Client, paho.Message) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(0)
	var out bytes.Buffer
	b.DescribeSessions(&out)
	for _, want := range []string{`session "watcher"`, `subscription "a/+/c" in the topic index: true`, `subscription "d/#" in the topic index: true`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("DescribeSessions wrote %q, want it to contain %q", out.String(), want)
		}
	}
}
