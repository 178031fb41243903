package server_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/buildinfo"
	"github.com/fencegate/fencegate/lease/server"
)

// TestBuildInfoMetric: the controller's /metrics says what it was built from.
func TestBuildInfoMetric(t *testing.T) {
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
	i := buildinfo.Read()
	line := fmt.Sprintf("fencegate_build_info{goversion=%q,revision=%q,version=%q} 1", i.GoVersion, i.Revision, i.Version)
	if text := scrape(t, hc, "http://"+c.HTTPAddr()+"/metrics"); !strings.Contains(text, line) {
		t.Fatalf("/metrics lacks %s", line)
	}
}
