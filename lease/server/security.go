package server

import (
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/httpauth"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// validateSecurity checks http_auth, authz, trust_keys and the embedded
// broker's exposure; errors name the key (and flag) and the value.
func (c Config) validateSecurity() error {
	if c.HTTP != "" {
		if err := c.HTTPAuth.Validate("http_auth", httpauth.DefaultHost(c.HTTP)); err != nil {
			return fmt.Errorf("http (--http): %w", err)
		}
	}
	if err := c.Authz.Validate("authz"); err != nil {
		return err
	}
	if len(c.Authz) > 0 && !c.HTTPAuth.Enabled() {
		return errors.New("authz: needs client identities: set http_auth.token_file (--http-token-file) or http_auth.tls.client_ca (--http-client-ca)")
	}
	for i, k := range c.TrustKeys {
		if k == "" {
			return fmt.Errorf("trust_keys[%d] (--trust-key): empty file name", i)
		}
	}
	return c.validateEmbeddedBroker()
}

// validateEmbeddedBroker refuses an embedded broker that would admit
// anyone on a non-loopback address.
func (c Config) validateEmbeddedBroker() error {
	b := c.EmbeddedBroker
	if b == "" {
		return nil
	}
	if err := c.EmbeddedBrokerTLS.Validate("embedded_broker_tls"); err != nil {
		return err
	}
	hasAuth := c.EmbeddedBrokerPasswordFile != "" || c.EmbeddedBrokerTLS.ClientCA != ""
	if !hasAuth && !c.EmbeddedBrokerAllowAnonymous && !mqtt.IsLoopback(b) {
		return fmt.Errorf("embedded_broker (--embedded-broker): %q is not a loopback address and the embedded broker would admit anyone: "+
			"set embedded_broker_password_file or embedded_broker_tls.client_ca, or embedded_broker_allow_anonymous: true (--embedded-broker-allow-anonymous)", b)
	}
	return nil
}

// embeddedOptions are the embedded broker's options: address, users, TLS
// and anonymous policy.
func (c *Controller) embeddedOptions() (mqtt.EmbeddedOptions, error) {
	o := mqtt.EmbeddedOptions{Addr: c.cfg.EmbeddedBroker, Logger: c.log.With("component", "broker"),
		AllowAnonymous: c.cfg.EmbeddedBrokerAllowAnonymous}
	var err error
	if p := c.cfg.EmbeddedBrokerPasswordFile; p != "" {
		if o.Users, err = mqtt.LoadPasswordFile(p); err != nil {
			return o, fmt.Errorf("embedded_broker_password_file: %w", err)
		}
	}
	if c.cfg.EmbeddedBrokerTLS.Enabled() {
		o.TLS, err = c.cfg.EmbeddedBrokerTLS.Config("embedded_broker_tls")
	}
	return o, err
}

// loadTrusted reads the trust_keys public key files.
func loadTrusted(paths []string) ([]ed25519.PublicKey, error) {
	out := make([]ed25519.PublicKey, 0, len(paths))
	for i, p := range paths {
		pub, err := fence.LoadPublicKey(p)
		if err != nil {
			return nil, fmt.Errorf("trust_keys[%d] (--trust-key): %w", i, err)
		}
		out = append(out, pub)
	}
	return out, nil
}

// httpListener wraps ln with TLS if configured and builds the lease
// API's authenticator (nil without authentication).
func (c *Controller) httpListener(ln net.Listener) (net.Listener, *httpauth.Authenticator, error) {
	auth, err := httpauth.New(c.cfg.HTTPAuth, "http_auth", c.log.With("component", "http"))
	if err != nil {
		return nil, nil, err
	}
	tc, err := c.cfg.HTTPAuth.ServerConfig("http_auth")
	if err != nil {
		return nil, nil, err
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	if auth == nil && !httpauth.IsLoopback(ln.Addr().String()) {
		c.log.Warn("controller HTTP lease API on a non-loopback address without authentication", "addr", ln.Addr().String())
	}
	return ln, auth, nil
}
