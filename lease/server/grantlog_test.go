package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/logtest"
	"github.com/fencegate/fencegate/lease/server"
	"github.com/fencegate/fencegate/protocol"
)

// TestGrantLogged: every grant is logged at info with domain, holder and token.
func TestGrantLogged(t *testing.T) {
	dir := t.TempDir()
	rec := logtest.New()
	c, err := server.New(server.Config{DataDir: dir, Key: filepath.Join(dir, "c.key"), GenerateKey: true, HTTP: "127.0.0.1:0"}, rec.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	body, _ := json.Marshal(protocol.Request{RequestID: "r1", Holder: "alice", TTLms: 60000})
	resp, err := hc.Post("http://"+c.HTTPAddr()+"/v1/leases/press/acquire", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rec.WaitFor(t, map[string]string{"msg": "lease granted", "level": "INFO", "domain": "press", "holder": "alice"})
}
