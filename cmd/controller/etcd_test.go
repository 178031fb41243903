package main

import (
	"io"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/lease/server"
)

func TestEtcdFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string // substring; empty: parses
	}{
		{name: "etcd without data dir", args: []string{"--store", "etcd", "--etcd-endpoints", "http://a:2379,http://b:2379", "--key", "k", "--http", ":0"}},
		{name: "etcd needs endpoints", args: []string{"--store", "etcd", "--key", "k", "--http", ":0"}, wantErr: "etcd.endpoints"},
		{name: "unknown store", args: []string{"--store", "zk", "--data-dir", "d", "--key", "k", "--http", ":0"}, wantErr: `"zk"`},
		{name: "bbolt still needs data dir", args: []string{"--key", "k", "--http", ":0"}, wantErr: "data_dir"},
		{name: "etcd cert without key", args: []string{"--store", "etcd", "--etcd-endpoints", "x", "--etcd-cert", "c", "--key", "k", "--http", ":0"}, wantErr: "etcd.tls.key"},
		{name: "bump etcd needs endpoints", args: []string{"epoch-bump", "--store", "etcd"}, wantErr: "etcd.endpoints"},
		{name: "bump etcd", args: []string{"epoch-bump", "--store", "etcd", "--etcd-endpoints", "x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseArgs(tc.args, io.Discard)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("parse: %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestEtcdDefaults: replicas on etcd share MQTT requests through a group
// and get client ids of their own.
func TestEtcdDefaults(t *testing.T) {
	cmd, err := parseArgs([]string{"--store", "etcd", "--etcd-endpoints", "http://a:2379,http://b:2379", "--key", "k", "--mqtt", "tcp://127.0.0.1:1883"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := cmd.cfg
	if len(c.Etcd.Endpoints) != 2 || c.MQTTShareGroup != server.DefaultShareGroup || !strings.HasPrefix(c.MQTT.ClientID, "fencegate-controller-") || c.MQTT.ClientID == "fencegate-controller" {
		t.Fatalf("etcd defaults: endpoints %q, share group %q, client id %q", c.Etcd.Endpoints, c.MQTTShareGroup, c.MQTT.ClientID)
	}
	cmd, err = parseArgs([]string{"--data-dir", "d", "--key", "k", "--mqtt", "tcp://127.0.0.1:1883"}, io.Discard)
	if err != nil || cmd.cfg.MQTTShareGroup != "" || cmd.cfg.MQTT.ClientID != "" {
		t.Fatalf("bbolt defaults changed: %+v, %v", cmd.cfg, err)
	}
}
