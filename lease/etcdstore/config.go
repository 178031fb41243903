package etcdstore

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Defaults of Config.
const (
	DefaultPrefix         = "fencegate/"
	DefaultDialTimeout    = 5 * time.Second
	DefaultRequestTimeout = 5 * time.Second
)

// Config is the connection to the etcd cluster. Endpoints is required;
// zero values of the other fields mean defaults.
type Config struct {
	// Endpoints are the cluster's client URLs, e.g. https://10.0.0.1:2379.
	Endpoints []string `yaml:"endpoints"`
	// Prefix is prepended to every key. Default "fencegate/". Controllers
	// sharing a prefix share their leases; give separate sites separate
	// prefixes.
	Prefix string `yaml:"prefix"`
	// DialTimeout bounds connecting. Default 5 s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// RequestTimeout bounds each read or transaction. A transaction that
	// times out may still have been applied; the controller re-reads the
	// record after any failed write. Default 5 s.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// Username and Password authenticate with etcd's auth (optional).
	// PasswordFile, if set, is read for the password (one line) instead.
	Username     string `yaml:"username"`
	Password     string `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
	// TLS secures the connection; empty: plain TCP (URLs with https need
	// at least CA).
	TLS TLS `yaml:"tls"`
}

// TLS names PEM files. CA verifies the servers; Cert and Key (both or
// neither) are the client certificate for etcd's client-cert auth.
type TLS struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Validate checks c; errors wrap ErrConfig and name the key under prefix
// (e.g. "etcd.endpoints").
func (c Config) Validate(prefix string) error {
	switch {
	case len(c.Endpoints) == 0:
		return fmt.Errorf("%w: %s.endpoints is required", ErrConfig, prefix)
	case (c.TLS.Cert == "") != (c.TLS.Key == ""):
		return fmt.Errorf("%w: %s.tls.cert and %s.tls.key go together", ErrConfig, prefix, prefix)
	case c.Password != "" && c.PasswordFile != "":
		return fmt.Errorf("%w: set %s.password or %s.password_file, not both", ErrConfig, prefix, prefix)
	case (c.Password != "" || c.PasswordFile != "") && c.Username == "":
		return fmt.Errorf("%w: %s.username is required with a password", ErrConfig, prefix)
	case c.DialTimeout < 0 || c.RequestTimeout < 0:
		return fmt.Errorf("%w: %s timeouts must not be negative", ErrConfig, prefix)
	}
	for _, e := range c.Endpoints {
		if strings.TrimSpace(e) == "" {
			return fmt.Errorf("%w: %s.endpoints has an empty entry", ErrConfig, prefix)
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	return c
}

// clientConfig builds the etcd client configuration, reading the TLS and
// password files.
func (c Config) clientConfig() (clientv3.Config, error) {
	cc := clientv3.Config{Endpoints: c.Endpoints, DialTimeout: c.DialTimeout, Username: c.Username,
		Password: c.Password, Logger: zap.NewNop()}
	if c.PasswordFile != "" {
		b, err := os.ReadFile(c.PasswordFile)
		if err != nil {
			return cc, fmt.Errorf("etcd password: %w", err)
		}
		cc.Password = strings.TrimRight(string(b), "\r\n")
	}
	var err error
	cc.TLS, err = c.TLS.config()
	return cc, err
}

// config returns nil without a CA or certificate: plain TCP.
func (t TLS) config() (*tls.Config, error) {
	if t.CA == "" && t.Cert == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("etcd tls ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: etcd tls ca %s holds no PEM certificate", ErrConfig, t.CA)
		}
	}
	if t.Cert != "" {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("etcd tls cert: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
