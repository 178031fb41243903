package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/fencegate/fencegate/internal/buildinfo"
	"github.com/fencegate/fencegate/lease/server"
)

// serveFlags is the serve flag set, writing into c; each flag's default is
// c's current value, so flags not given leave c as it is.
func serveFlags(c *server.Config, configFile *string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveUsage)
		fs.PrintDefaults()
	}
	buildinfo.Flag(fs)
	fs.StringVar(configFile, "config", "", "YAML config file (optional; flags override it)")
	fs.StringVar(&c.Store, "store", c.Store, "lease store: bbolt (default) or etcd")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory of the bbolt lease store (required with bbolt)")
	etcdFlags(fs, c)
	fs.StringVar(&c.MQTTShareGroup, "mqtt-share-group", c.MQTTShareGroup, "MQTT shared-subscription group of the replicas (default with etcd: fencegate-controllers)")
	fs.StringVar(&c.Key, "key", c.Key, "Ed25519 private key, PKCS#8 PEM (required)")
	fs.BoolVar(&c.GenerateKey, "generate-key", c.GenerateKey, "create --key (and its .pub) if it does not exist")
	fs.StringVar(&c.HTTP, "http", c.HTTP, "HTTP listen address, e.g. 127.0.0.1:8480")
	fs.StringVar(&c.EmbeddedBroker, "embedded-broker", c.EmbeddedBroker, "start an in-process MQTT broker on this address")
	m := &c.MQTT
	fs.StringVar(&m.Broker, "mqtt", m.Broker, "MQTT broker URL, e.g. tcp://127.0.0.1:1883")
	fs.StringVar(&m.ClientID, "mqtt-client-id", m.ClientID, "MQTT client id (default fencegate-controller)")
	fs.StringVar(&m.Username, "mqtt-username", m.Username, "MQTT username")
	fs.StringVar(&m.Password, "mqtt-password", m.Password, "MQTT password")
	fs.StringVar(&m.TLS.CA, "mqtt-ca", m.TLS.CA, "PEM CA bundle to verify the broker")
	fs.StringVar(&m.TLS.Cert, "mqtt-cert", m.TLS.Cert, "PEM client certificate")
	fs.StringVar(&m.TLS.Key, "mqtt-key", m.TLS.Key, "PEM client certificate key")
	guardFlags(fs, c)
	securityFlags(fs, c)
	fs.StringVar(&c.TopicPrefix, "topic-prefix", c.TopicPrefix, "MQTT topic prefix (default fencegate/v1)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error (default info)")
	return fs
}

// serveUsage heads controller --help: the sub-commands, then serve's flags.
const serveUsage = `usage: controller [serve] --data-dir DIR --key FILE [--mqtt URL | --embedded-broker ADDR] [--http ADDR] [flags]
       controller [serve] --store etcd --etcd-endpoints URL,... --key FILE [flags]
       controller keygen [--dir DIR] [--force]
       controller epoch-bump --data-dir DIR [--epoch N]
       controller epoch-bump --store etcd --etcd-endpoints URL,... [--epoch N]
       controller --version

commands:
  serve       run the lease controller (the default)
  keygen      write controller.key (0600) and controller.pub
  epoch-bump  raise a stopped controller's store epoch (after restoring a backup)

Run 'controller keygen -h' or 'controller epoch-bump -h' for their flags.

serve flags:
`

// guardFlags registers the flags that bound what the controller serves:
// reply prefixes, domains, the domain cap and a new store's epoch.
func guardFlags(fs *flag.FlagSet, c *server.Config) {
	fs.Func("mqtt-reply-prefix", "a further topic prefix lease responses may go to (repeatable; fencegate/v1/replies/ always)", replacing(&c.MQTT.ReplyPrefixes))
	fs.Func("domains", "comma-separated glob patterns of the domains served (default: all)", func(v string) error {
		c.Domains = strings.Split(v, ",")
		return nil
	})
	fs.IntVar(&c.MaxDomains, "max-domains", c.MaxDomains, "domains held in memory at most; beyond it acquires are busy (default 10000)")
	fs.Uint64Var(&c.Epoch, "epoch", c.Epoch, "epoch of a new store instead of the clock's (required while the clock is before the build date)")
}

// etcdFlags registers the etcd store's flags into c.Etcd.
func etcdFlags(fs *flag.FlagSet, c *server.Config) {
	e := &c.Etcd
	fs.Func("etcd-endpoints", "comma-separated etcd client URLs (with --store etcd)", func(v string) error {
		e.Endpoints = strings.Split(v, ",")
		return nil
	})
	fs.StringVar(&e.Prefix, "etcd-prefix", e.Prefix, "etcd key prefix (default fencegate/)")
	fs.StringVar(&e.Username, "etcd-username", e.Username, "etcd auth user")
	fs.StringVar(&e.PasswordFile, "etcd-password-file", e.PasswordFile, "file holding the etcd auth password")
	fs.StringVar(&e.TLS.CA, "etcd-ca", e.TLS.CA, "PEM CA bundle to verify the etcd servers")
	fs.StringVar(&e.TLS.Cert, "etcd-cert", e.TLS.Cert, "PEM client certificate for etcd")
	fs.StringVar(&e.TLS.Key, "etcd-key", e.TLS.Key, "PEM client certificate key for etcd")
}

// replacing is a repeatable flag's setter: the first use replaces what
// list held (from the config file), later ones append.
func replacing(list *[]string) func(string) error {
	fresh := true
	return func(v string) error {
		if fresh {
			*list, fresh = nil, false
		}
		*list = append(*list, v)
		return nil
	}
}

// clearOverridden drops what a flag given replaces besides its own field:
// --etcd-password-file replaces a password in the config file.
func clearOverridden(c *server.Config, name string) {
	if name == "etcd-password-file" {
		c.Etcd.Password = ""
	}
}

// securityFlags registers the key-rotation and HTTP authentication flags
// (the authz policy is config-file only: authz:).
func securityFlags(fs *flag.FlagSet, c *server.Config) {
	fs.Func("trust-key", "a further public key (PEM) whose leases renew and release accept, e.g. the previous key (repeatable)", replacing(&c.TrustKeys))
	a := &c.HTTPAuth
	fs.StringVar(&a.TokenFile, "http-token-file", a.TokenFile, "bearer tokens for the HTTP lease API, one name:token a line")
	fs.StringVar(&a.TLS.Cert, "http-cert", a.TLS.Cert, "PEM server certificate: serve HTTPS")
	fs.StringVar(&a.TLS.Key, "http-key", a.TLS.Key, "PEM server certificate key")
	fs.StringVar(&a.TLS.ClientCA, "http-client-ca", a.TLS.ClientCA, "PEM CA bundle: a verified client certificate authenticates its common name")
	fs.BoolVar(&a.AllowUnauthenticated, "http-allow-unauthenticated", a.AllowUnauthenticated, "allow a non-loopback --http without tokens or client certificates")
	fs.BoolVar(&c.EmbeddedBrokerAllowAnonymous, "embedded-broker-allow-anonymous", c.EmbeddedBrokerAllowAnonymous, "allow a non-loopback --embedded-broker (it admits anyone)")
}
