// Package tlstest makes a throw-away certificate authority and the
// certificates tests need (brokers, controllers, clients), with
// crypto/x509, written as PEM files into a test's temporary directory.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a test certificate authority. Its files live in Dir.
type CA struct {
	t      testing.TB
	Dir    string
	CAFile string // PEM of the CA certificate
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial int64
}

// Pair names a certificate and its key, PEM files.
type Pair struct {
	Cert, Key string
}

// NewCA makes a CA named cn in a new temporary directory of t.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := mustKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{t: t, Dir: t.TempDir(), cert: cert, key: key, serial: 1}
	ca.CAFile = ca.write(cn+"-ca.pem", "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for localhost, 127.0.0.1 and ::1
// (and the extra DNS names), named cn.
func (ca *CA) Server(cn string, dnsNames ...string) Pair {
	tmpl := ca.template(cn)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.DNSNames = append([]string{"localhost"}, dnsNames...)
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	return ca.issue(cn, tmpl)
}

// Client issues a client certificate whose subject common name is cn
// (the identity a server reads from it).
func (ca *CA) Client(cn string) Pair {
	tmpl := ca.template(cn)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.issue(cn, tmpl)
}

func (ca *CA) template(cn string) *x509.Certificate {
	ca.serial++
	return &x509.Certificate{SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature}
}

func (ca *CA) issue(cn string, tmpl *x509.Certificate) Pair {
	t := ca.t
	t.Helper()
	key := mustKey(t)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{Cert: ca.write(cn+".pem", "CERTIFICATE", der), Key: ca.write(cn+".key", "PRIVATE KEY", kder)}
}

func (ca *CA) write(name, typ string, der []byte) string {
	path := filepath.Join(ca.Dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return path
}

func mustKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
