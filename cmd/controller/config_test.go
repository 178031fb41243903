package main

import (
	"strings"
	"testing"

	"github.com/fencegate/fencegate/lease/etcdstore"
)

// TestValidateEtcdSkipsChecks: with store etcd, Validate still requires a
// key and something to serve (the switch used to end at the etcd case).
func TestValidateEtcdSkipsChecks(t *testing.T) {
	etcd := etcdstore.Config{Endpoints: []string{"http://127.0.0.1:2379"}}
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "etcd without key", cfg: Config{Store: storeEtcd, Etcd: etcd, HTTP: ":0"}, wantErr: "key (--key) is required"},
		{name: "etcd with nothing to serve", cfg: Config{Store: storeEtcd, Etcd: etcd, Key: "k"}, wantErr: "nothing to serve"},
		{name: "etcd with bad log level", cfg: Config{Store: storeEtcd, Etcd: etcd, Key: "k", HTTP: ":0", LogLevel: "loud"}, wantErr: "log_level"},
		{name: "etcd complete", cfg: Config{Store: storeEtcd, Etcd: etcd, Key: "k", HTTP: ":0"}},
		{name: "bbolt without data dir", cfg: Config{Key: "k", HTTP: ":0"}, wantErr: "data_dir"},
		{name: "bbolt complete", cfg: Config{DataDir: "d", Key: "k", HTTP: ":0"}},
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
