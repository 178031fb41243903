package server

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/fencegate/fencegate/internal/httpauth"
	"github.com/fencegate/fencegate/internal/yamlcfg"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/etcdstore"
	"github.com/fencegate/fencegate/lease/httpapi"
	"github.com/fencegate/fencegate/lease/mqttapi"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// Lease stores the controller can run on (Config.Store).
const (
	StoreBolt = "bbolt"
	StoreEtcd = "etcd"
)

// DefaultShareGroup is the MQTT share group of replicas on an etcd store.
const DefaultShareGroup = "fencegate-controllers"

// Config is the controller's configuration: the YAML file (--config) with
// flags on top. Zero values mean defaults. Errors of Validate name the key
// and, in parentheses, the flag that sets it.
type Config struct {
	// Store is the lease store: "bbolt" (default: one controller process,
	// DataDir/leases.db) or "etcd" (several replicas on one etcd cluster,
	// see Etcd).
	Store string `yaml:"store"`
	// DataDir holds the bbolt lease store, leases.db. Required with bbolt;
	// created (0700) if missing.
	DataDir string `yaml:"data_dir"`
	// Etcd is the etcd cluster of the etcd store.
	Etcd etcdstore.Config `yaml:"etcd"`
	// MQTTShareGroup is the MQTT shared-subscription group through which
	// replicas take lease requests, one replica per request. Default with
	// the etcd store "fencegate-controllers" (see WithStoreDefaults); empty
	// with bbolt (one controller subscribes plainly).
	MQTTShareGroup string `yaml:"mqtt_share_group"`
	// Key is the Ed25519 private key file (PKCS#8 PEM). Required.
	Key string `yaml:"key"`
	// GenerateKey creates Key (and Key's .pub) if it does not exist.
	GenerateKey bool `yaml:"generate_key"`
	// TrustKeys are further public key files (PEM) whose leases renew and
	// release accept — the previous key during a rotation. A renewal
	// re-signs such a lease with Key.
	TrustKeys []string `yaml:"trust_keys"`
	// HTTP is the HTTP listen address, e.g. "127.0.0.1:8480"; a host-less
	// ":8480" binds 127.0.0.1. Empty: no HTTP.
	HTTP string `yaml:"http"`
	// HTTPAuth authenticates the lease endpoints (bearer token file and/or
	// TLS client certificates). A non-loopback HTTP needs one of them or
	// http_auth.allow_unauthenticated.
	HTTPAuth httpauth.Config `yaml:"http_auth"`
	// Authz maps client identities to the domains and holder names they
	// may use over HTTP; empty allows everything. Needs HTTPAuth.
	Authz httpapi.Policy `yaml:"authz"`
	// EmbeddedBroker starts an in-process MQTT broker on this address and,
	// unless mqtt.broker is set, serves the MQTT API through it.
	EmbeddedBroker string `yaml:"embedded_broker"`
	// EmbeddedBrokerAllowAnonymous lets the embedded broker admit clients
	// without credentials on a non-loopback address (logged as a warning).
	EmbeddedBrokerAllowAnonymous bool `yaml:"embedded_broker_allow_anonymous"`
	// EmbeddedBrokerPasswordFile is the embedded broker's users,
	// "user:bcrypt-hash" lines (htpasswd -nB).
	EmbeddedBrokerPasswordFile string `yaml:"embedded_broker_password_file"`
	// EmbeddedBrokerTLS makes the embedded broker serve TLS and, with
	// client_ca, admit clients by certificate.
	EmbeddedBrokerTLS mqtt.ServerTLS `yaml:"embedded_broker_tls"`
	// MQTT is the broker connection and where responses may go. Empty
	// broker (and no embedded broker): no MQTT API.
	MQTT MQTTConfig `yaml:"mqtt"`
	// Domains are the fencing domains served, as glob patterns ("press-*",
	// "line[0-9]"); requests for others are bad_request. Empty: every
	// valid domain name.
	Domains []string `yaml:"domains"`
	// MaxDomains bounds the domains in memory (live leases, waiting
	// acquires); an acquire beyond it is busy. Default 10000.
	MaxDomains int `yaml:"max_domains"`
	// Epoch is the epoch of a new store (Unix ms by convention), instead
	// of the clock's. Required to create a store while the clock reads
	// before the build date; ignored for an existing store; refused with
	// etcd.
	Epoch uint64 `yaml:"epoch"`
	// TopicPrefix is the protocol topic prefix. Default "fencegate/v1".
	TopicPrefix string `yaml:"topic_prefix"`
	// LogLevel is debug, info, warn or error (see Level). Default info.
	LogLevel string `yaml:"log_level"`
}

// MQTTConfig is the controller's mqtt: block: the broker connection and
// the reply prefixes.
type MQTTConfig struct {
	mqtt.Config `yaml:",inline"`
	// ReplyPrefixes are topic prefixes lease responses may be published
	// under besides the reply namespace {topic_prefix}/replies/, which is
	// always allowed. No wildcards, no $ topics.
	ReplyPrefixes []string `yaml:"reply_prefixes"`
}

// Validate checks the connection and every reply prefix; errors name the
// key (under prefix) and the value.
func (c MQTTConfig) Validate(prefix string) error {
	if err := c.Config.Validate(prefix); err != nil {
		return err
	}
	for i, p := range c.ReplyPrefixes {
		if err := mqttapi.CheckReplyPrefix(p); err != nil {
			return fmt.Errorf("%s.reply_prefixes[%d] (--mqtt-reply-prefix): %w", prefix, i, err)
		}
	}
	return nil
}

// LoadConfig reads a YAML config; an unknown key or a value of the wrong
// type is an error naming the key path and the value ("mqtt.keep_alive:
// value \"soon\": …"), as the agent's are (internal/yamlcfg). It does not
// validate.
func LoadConfig(path string) (Config, error) {
	var cfg Config
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if err := yamlcfg.Decode(data, &cfg); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Validate checks the configuration, one check after the other (every
// check applies to every store); errors name the key and the value.
func (c Config) Validate() error {
	if err := c.validateStore(); err != nil {
		return err
	}
	if c.Key == "" {
		return errors.New("key (--key) is required")
	}
	if c.HTTP == "" && c.MQTT.Broker == "" && c.EmbeddedBroker == "" {
		return errors.New("nothing to serve: set http (--http), mqtt.broker (--mqtt) or embedded_broker (--embedded-broker)")
	}
	if err := lease.CheckDomainPatterns(c.Domains); err != nil {
		return fmt.Errorf("domains (--domains): %w", err)
	}
	if c.MaxDomains < 0 {
		return fmt.Errorf("max_domains (--max-domains): %d is negative", c.MaxDomains)
	}
	if _, err := c.Level(); err != nil {
		return err
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	return c.MQTT.Validate("mqtt")
}

// validateStore checks store and what it needs: etcd its cluster, bbolt
// data_dir.
func (c Config) validateStore() error {
	switch c.Store {
	case "", StoreBolt:
		if c.DataDir == "" {
			return errors.New("data_dir (--data-dir) is required")
		}
		return nil
	case StoreEtcd:
		return c.Etcd.Validate("etcd")
	}
	return fmt.Errorf("store (--store): %q is not bbolt or etcd", c.Store)
}

// WithStoreDefaults fills in what the etcd store implies: a share group
// and an MQTT client id unique to this process (replicas must not take
// each other's broker session). With bbolt it returns c unchanged.
func (c Config) WithStoreDefaults() Config {
	if c.Store != StoreEtcd {
		return c
	}
	if c.MQTTShareGroup == "" {
		c.MQTTShareGroup = DefaultShareGroup
	}
	if c.MQTT.ClientID == "" {
		host, _ := os.Hostname()
		c.MQTT.ClientID = fmt.Sprintf("fencegate-controller-%s-%d", host, os.Getpid())
	}
	return c
}

// Level is the slog level LogLevel names; info when empty.
func (c Config) Level() (slog.Level, error) {
	var l slog.Level
	if c.LogLevel == "" {
		return slog.LevelInfo, nil
	}
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return l, fmt.Errorf("log_level: %q is not debug, info, warn or error", c.LogLevel)
	}
	return l, nil
}

// storeName is the store for logs: Store, or bbolt when empty.
func (c Config) storeName() string {
	if c.Store == "" {
		return StoreBolt
	}
	return c.Store
}
