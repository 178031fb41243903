package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/lease/etcdstore"
	"github.com/fencegate/fencegate/lease/server"
	"github.com/fencegate/fencegate/protocol"
)

// TestMetricsWired: /metrics counts a grant, the live lease and the store
// commit that made it durable (the store's commit hook reaches the
// metrics created before it).
func TestMetricsWired(t *testing.T) {
	dir := t.TempDir()
	c, err := server.New(server.Config{DataDir: dir, Key: filepath.Join(dir, "c.key"), GenerateKey: true, HTTP: "127.0.0.1:0"}, nil)
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
	var r protocol.Response
	err = json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if err != nil || r.Code != protocol.CodeGranted {
		t.Fatalf("acquire: %+v %v", r, err)
	}
	text := scrape(t, hc, "http://"+c.HTTPAddr()+"/metrics")
	for _, want := range []string{`(?m)^fencegate_lease_grants_total 1$`, `(?m)^fencegate_lease_active 1$`,
		`(?m)^fencegate_lease_domains 1$`, `(?m)^fencegate_lease_commit_duration_seconds_count [1-9]`} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("/metrics does not match %s", want)
		}
	}
}

func scrape(t *testing.T, hc *http.Client, url string) string {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestNewEtcdRefusesEpoch: the etcd store takes a new prefix's epoch from
// the clock, so New refuses an epoch setting before it dials etcd.
func TestNewEtcdRefusesEpoch(t *testing.T) {
	dir := t.TempDir()
	cfg := server.Config{Store: server.StoreEtcd, Etcd: etcdstore.Config{Endpoints: []string{"http://127.0.0.1:1"}},
		Key: filepath.Join(dir, "c.key"), GenerateKey: true, HTTP: "127.0.0.1:0", Epoch: 5}
	_, err := server.New(cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "epoch (--epoch): not supported with the etcd store") {
		t.Fatalf("New with etcd and an epoch: %v", err)
	}
}
