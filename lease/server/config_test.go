package server_test

import (
	"strings"
	"testing"

	"github.com/fencegate/fencegate/lease/etcdstore"
	"github.com/fencegate/fencegate/lease/server"
)

// TestValidateEtcdSkipsChecks: with store etcd, Validate still requires a
// key and something to serve (the switch used to end at the etcd case).
func TestValidateEtcdSkipsChecks(t *testing.T) {
	etcd := etcdstore.Config{Endpoints: []string{"http://127.0.0.1:2379"}}
	tests := []struct {
		name    string
		cfg     server.Config
		wantErr string
	}{
		{name: "etcd without key", cfg: server.Config{Store: server.StoreEtcd, Etcd: etcd, HTTP: ":0"}, wantErr: "key (--key) is required"},
		{name: "etcd with nothing to serve", cfg: server.Config{Store: server.StoreEtcd, Etcd: etcd, Key: "k"}, wantErr: "nothing to serve"},
		{name: "etcd with bad log level", cfg: server.Config{Store: server.StoreEtcd, Etcd: etcd, Key: "k", HTTP: ":0", LogLevel: "loud"}, wantErr: "log_level"},
		{name: "etcd complete", cfg: server.Config{Store: server.StoreEtcd, Etcd: etcd, Key: "k", HTTP: ":0"}},
		{name: "bbolt without data dir", cfg: server.Config{Key: "k", HTTP: ":0"}, wantErr: "data_dir"},
		{name: "bbolt complete", cfg: server.Config{DataDir: "d", Key: "k", HTTP: ":0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Validate: %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}
