package mqtt

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// Config is how a component reaches its broker. Zero values mean defaults.
type Config struct {
	// Broker is the broker URL: tcp://, ssl:// (or tls://), ws:// or wss://.
	// Empty means "use the embedded broker" where a component has one.
	Broker string `yaml:"broker"`
	// ClientID is the MQTT client id; components choose a default.
	ClientID string `yaml:"client_id"`
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	TLS      TLS    `yaml:"tls"`
	// KeepAlive is the MQTT keep-alive. Default 30 s.
	KeepAlive time.Duration `yaml:"keep_alive"`
	// ConnectTimeout bounds one connection attempt. Default 10 s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// MaxReconnectInterval caps the exponential reconnect backoff. Default 10 s.
	MaxReconnectInterval time.Duration `yaml:"max_reconnect_interval"`
}

// TLS names PEM files for a TLS connection. CA alone verifies the broker;
// Cert and Key together add a client certificate.
type TLS struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Validate checks the configuration; errors name the key (under prefix, e.g.
// "mqtt") and the value.
func (c Config) Validate(prefix string) error {
	if c.Broker != "" {
		u, err := url.Parse(c.Broker)
		if err != nil || u.Host == "" {
			return fmt.Errorf("%s.broker: %q is not a broker URL (tcp://host:port)", prefix, c.Broker)
		}
		switch u.Scheme {
		case "tcp", "mqtt", "ssl", "tls", "mqtts", "ws", "wss":
		default:
			return fmt.Errorf("%s.broker: scheme %q of %q is not tcp, ssl, tls, ws or wss", prefix, u.Scheme, c.Broker)
		}
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		return fmt.Errorf("%s.tls: cert %q and key %q must be given together", prefix, c.TLS.Cert, c.TLS.Key)
	}
	for key, d := range map[string]time.Duration{"keep_alive": c.KeepAlive, "connect_timeout": c.ConnectTimeout,
		"max_reconnect_interval": c.MaxReconnectInterval} {
		if d < 0 {
			return fmt.Errorf("%s.%s: %v is negative", prefix, key, d)
		}
	}
	// MQTT carries the keep-alive in whole seconds, 16 bits, and 0 means
	// none: 500ms or 65536s would switch it off (no pings, no Will).
	if ka := c.KeepAlive; ka != 0 && (ka < time.Second || ka > 65535*time.Second) {
		return fmt.Errorf("%s.keep_alive: %v must be 1s..65535s (0: the default, 30s)", prefix, ka)
	}
	return nil
}

// ClientOptions returns paho options for c: clean session, auto-reconnect
// with capped backoff, connect retry, a store that keeps its own copy of
// each publish (see copyingStore), and onConnect called (in a paho
// goroutine) after every successful connection — subscribe there, so a
// reconnect resubscribes. Callers add their own Will and ack settings.
func (c Config) ClientOptions(onConnect paho.OnConnectHandler) (*paho.ClientOptions, error) {
	if c.Broker == "" {
		return nil, errors.New("mqtt: no broker URL")
	}
	o := paho.NewClientOptions().AddBroker(c.Broker).SetClientID(c.ClientID).
		SetUsername(c.Username).SetPassword(c.Password).
		SetKeepAlive(orDefault(c.KeepAlive, 30*time.Second)).
		SetConnectTimeout(orDefault(c.ConnectTimeout, 10*time.Second)).
		SetMaxReconnectInterval(orDefault(c.MaxReconnectInterval, 10*time.Second)).
		SetAutoReconnect(true).SetConnectRetry(true).SetConnectRetryInterval(connectRetryInterval).
		SetCleanSession(true).SetProtocolVersion(4).SetOnConnectHandler(onConnect).
		SetStore(newCopyingStore())
	if c.TLS.CA != "" || c.TLS.Cert != "" {
		tc, err := c.TLS.config()
		if err != nil {
			return nil, err
		}
		o.SetTLSConfig(tc)
	}
	return o, nil
}

// connectRetryInterval is the pause between first connection attempts.
const connectRetryInterval = time.Second

func (t TLS) config() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("mqtt.tls.ca: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("mqtt.tls.ca: %q holds no PEM certificate", t.CA)
		}
	}
	if t.Cert != "" {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("mqtt.tls.cert: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Wait waits for a paho token up to timeout and returns its error, or a
// timeout error.
func Wait(t paho.Token, timeout time.Duration) error {
	if !t.WaitTimeout(timeout) {
		return fmt.Errorf("mqtt: no answer from the broker in %v", timeout)
	}
	return t.Error()
}
