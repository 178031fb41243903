package mqtt

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// ServerTLS names the PEM files of a TLS listener (the embedded broker's).
// Cert and Key are the server's certificate chain and key; ClientCA, if
// set, is the CA bundle client certificates must chain to: every client
// must then present one (mutual TLS).
type ServerTLS struct {
	Cert     string `yaml:"cert"`
	Key      string `yaml:"key"`
	ClientCA string `yaml:"client_ca"`
}

// Enabled reports whether any file is named.
func (s ServerTLS) Enabled() bool { return s.Cert != "" || s.Key != "" || s.ClientCA != "" }

// Validate checks that Cert and Key are given together and that ClientCA
// comes with them; errors name the key under prefix (e.g. "mqtt.server_tls").
func (s ServerTLS) Validate(prefix string) error {
	if (s.Cert == "") != (s.Key == "") {
		return fmt.Errorf("%s: cert %q and key %q must be given together", prefix, s.Cert, s.Key)
	}
	if s.ClientCA != "" && s.Cert == "" {
		return fmt.Errorf("%s.client_ca: %q needs cert and key (a TLS listener)", prefix, s.ClientCA)
	}
	return nil
}

// Config loads the files into a server TLS configuration (TLS 1.2 or
// later); with ClientCA it requires and verifies client certificates.
// Errors name the key under prefix and the file.
func (s ServerTLS) Config(prefix string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(s.Cert, s.Key)
	if err != nil {
		return nil, fmt.Errorf("%s.cert: %w", prefix, err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if s.ClientCA != "" {
		if tc.ClientCAs, err = LoadCertPool(s.ClientCA); err != nil {
			return nil, fmt.Errorf("%s.client_ca: %w", prefix, err)
		}
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// LoadCertPool reads a PEM bundle of CA certificates.
func LoadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%q holds no PEM certificate", path)
	}
	return pool, nil
}

// PeerIdentity is the identity a verified client certificate names: its
// subject common name, or else its first DNS name; "" without one.
func PeerIdentity(cs *tls.ConnectionState) string {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return ""
	}
	c := cs.PeerCertificates[0]
	if c.Subject.CommonName != "" {
		return c.Subject.CommonName
	}
	if len(c.DNSNames) > 0 {
		return c.DNSNames[0]
	}
	return ""
}
