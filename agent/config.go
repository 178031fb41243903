package agent

import (
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/yamlcfg"
	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// Defaults for Config.
const (
	DefaultDataDir    = "fencegate-data"
	DefaultListen     = "127.0.0.1:1883"
	DefaultHTTPListen = "127.0.0.1:9464"
	DefaultMaxPayload = 64 << 10
	DefaultQueue      = 1024
	DefaultTimeout    = 10 * time.Second
	DefaultGrantWait  = 2 * time.Second
)

// Config is the agent's configuration file (YAML). Zero values mean defaults.
type Config struct {
	Agent   AgentConfig    `yaml:"agent"`
	MQTT    MQTTConfig     `yaml:"mqtt"`
	Trust   TrustConfig    `yaml:"trust"`
	Limits  LimitsConfig   `yaml:"limits"`
	Journal JournalConfig  `yaml:"journal"`
	Devices []DeviceConfig `yaml:"devices"`
	HTTP    HTTPConfig     `yaml:"http"`
}

// AgentConfig names the agent and where it keeps its state.
type AgentConfig struct {
	// ID names this agent in status topics; default the host name.
	ID string `yaml:"id"`
	// DataDir holds the fence store (fence.db). Default "fencegate-data".
	DataDir string `yaml:"data_dir"`
	// AnswerUnknownDevices makes the agent answer commands for devices it
	// does not own (bad_request, "unknown device"). Only for a broker this
	// agent has to itself: with several agents on one broker each would
	// answer the others' devices. Default false.
	AnswerUnknownDevices bool `yaml:"answer_unknown_devices"`
}

// MQTTConfig is how the agent reaches its broker.
type MQTTConfig struct {
	// Broker is the broker URL; empty starts an embedded broker on Listen.
	Broker string `yaml:"broker"`
	// Listen is the embedded broker's address. Default 127.0.0.1:1883.
	// An address that is not loopback needs PasswordFile, ServerTLS with a
	// client CA, or AllowAnonymous.
	Listen string `yaml:"listen"`
	// PasswordFile is the embedded broker's users: "user:bcrypt-hash" lines
	// (htpasswd -nB). Empty: no password users.
	PasswordFile string `yaml:"password_file"`
	// ServerTLS makes the embedded broker serve TLS (cert, key) and, with
	// client_ca, admit clients by certificate (mutual TLS).
	ServerTLS mqtt.ServerTLS `yaml:"server_tls"`
	// AllowAnonymous lets the embedded broker admit clients without
	// credentials on a non-loopback Listen (logged as a warning). Default
	// false: such a broker refuses to start.
	AllowAnonymous bool `yaml:"allow_anonymous"`
	// ClientID default "fencegate-agent-<agent id>"; unique per agent.
	ClientID string   `yaml:"client_id"`
	Username string   `yaml:"username"`
	Password string   `yaml:"password"`
	TLS      mqtt.TLS `yaml:"tls"`
	// Prefix of protocol v1 topics. Default "fencegate/v1".
	Prefix string `yaml:"prefix"`
	// ReplyPrefixes are the topic prefixes a command's reply_to may name.
	// Default: the reply namespace "<prefix>/replies/". Protocol topics,
	// $ topics and the topics drivers publish to are refused whatever this
	// says (see protocol.ReplyRule).
	ReplyPrefixes []string `yaml:"reply_prefixes"`
	// GrantWait bounds how long, after (re)connecting, the agent waits for
	// the retained grants of its domains before it subscribes to commands.
	// Default 2 s.
	GrantWait time.Duration `yaml:"grant_wait"`
	// KeepAlive is the MQTT keep-alive: a silent broker link is given up
	// after about 1.5× this. Default 30 s.
	KeepAlive time.Duration `yaml:"keep_alive"`
	// ConnectTimeout bounds one connection attempt. Default 10 s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// MaxReconnectInterval caps the reconnect backoff. Default 10 s.
	MaxReconnectInterval time.Duration `yaml:"max_reconnect_interval"`
}

// TrustConfig lists the controller public keys whose tokens are accepted.
type TrustConfig struct {
	// Keys are PEM (PKIX) public key files; at least one.
	Keys []string `yaml:"keys"`
}

// LimitsConfig bounds what the agent takes in.
type LimitsConfig struct {
	// MaxPayload is the largest command payload in bytes. Default 64 KiB.
	MaxPayload int `yaml:"max_payload"`
	// Queue is the per-device queue length; a command beyond it is answered
	// busy. Default 1024.
	Queue int `yaml:"queue"`
}

// JournalConfig is the journal's retention per device. The journal is the
// dedupe window — a command id pruned from it is a new command if it comes
// again — and what bounds fence.db on disk: about 1.2 KiB a record, so
// devices × MaxRecords × 1.2 KiB at most (docs/agent.md).
type JournalConfig struct {
	// MaxRecords is the records kept per device. Default 10 000.
	MaxRecords int `yaml:"max_records"`
	// MaxAge is how long a record is kept, on the store's clock (the time
	// the agent has run). Default 24 h.
	MaxAge time.Duration `yaml:"max_age"`
}

// DeviceConfig is one device the agent owns.
type DeviceConfig struct {
	// ID is the device id in topics, [A-Za-z0-9._-]{1,128}.
	ID string `yaml:"id"`
	// Domain is the fencing domain whose tokens command it. Default the id.
	Domain string `yaml:"domain"`
	// Driver names a registered driver ("sim", …).
	Driver string `yaml:"driver"`
	// Timeout bounds one apply. Default 10 s.
	Timeout time.Duration `yaml:"timeout"`
	// Settings are the driver's own settings.
	Settings yaml.Node `yaml:"settings"`
}

// HTTPConfig is the health, metrics and status endpoint.
type HTTPConfig struct {
	// Listen address; default 127.0.0.1:9464; "off" disables it.
	Listen string `yaml:"listen"`
	// TokenFile holds the bearer token the mutating and bulk endpoints
	// (resolving an in-doubt command, backup) require. Empty: those
	// endpoints answer only clients on a loopback address.
	TokenFile string `yaml:"token_file"`
}

// LoadConfig reads and validates a config file; errors name the key path
// and the value. Defaults are applied.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	var c Config
	if err := yamlcfg.Decode(data, &c); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// WithDefaults returns c with every zero value replaced by its default.
func (c Config) WithDefaults() Config {
	if c.Agent.ID == "" {
		h, _ := os.Hostname()
		c.Agent.ID = sanitizeID(h)
	}
	c.Agent.DataDir = orString(c.Agent.DataDir, DefaultDataDir)
	c.MQTT.Listen = orString(c.MQTT.Listen, DefaultListen)
	c.MQTT.ClientID = orString(c.MQTT.ClientID, "fencegate-agent-"+c.Agent.ID)
	c.MQTT.Prefix = orString(c.MQTT.Prefix, protocol.DefaultPrefix)
	if c.MQTT.GrantWait == 0 {
		c.MQTT.GrantWait = DefaultGrantWait
	}
	c.HTTP.Listen = orString(c.HTTP.Listen, DefaultHTTPListen)
	if c.Limits.MaxPayload == 0 {
		c.Limits.MaxPayload = DefaultMaxPayload
	}
	if c.Limits.Queue == 0 {
		c.Limits.Queue = DefaultQueue
	}
	if c.Journal.MaxRecords == 0 {
		c.Journal.MaxRecords = persist.DefaultMaxRecords
	}
	if c.Journal.MaxAge == 0 {
		c.Journal.MaxAge = persist.DefaultMaxAge
	}
	for i := range c.Devices {
		d := &c.Devices[i]
		d.Domain = orString(d.Domain, d.ID)
		if d.Timeout == 0 {
			d.Timeout = DefaultTimeout
		}
	}
	return c
}

// Validate checks a config with defaults applied; the error names the key
// path and the value.
func (c Config) Validate() error {
	if err := fence.CheckID("agent.id", c.Agent.ID); err != nil {
		return fmt.Errorf("agent.id: %w", err)
	}
	if err := c.MQTT.client().Validate("mqtt"); err != nil {
		return err
	}
	if err := c.MQTT.validateEmbedded(); err != nil {
		return err
	}
	for i, p := range c.MQTT.ReplyPrefixes {
		if p == "" || strings.HasPrefix(p, "$") || strings.ContainsAny(p, "+#\x00") {
			return fmt.Errorf("mqtt.reply_prefixes[%d]: %q must be a non-empty topic prefix without wildcards, not a $ topic", i, p)
		}
	}
	if c.MQTT.GrantWait < 0 {
		return fmt.Errorf("mqtt.grant_wait: %v is negative", c.MQTT.GrantWait)
	}
	if len(c.Trust.Keys) == 0 {
		return fmt.Errorf("trust.keys: at least one controller public key file is required")
	}
	if c.Limits.MaxPayload < 0 || c.Limits.MaxPayload > 16<<20 {
		return fmt.Errorf("limits.max_payload: %d is not in 1..%d", c.Limits.MaxPayload, 16<<20)
	}
	if c.Limits.Queue < 0 {
		return fmt.Errorf("limits.queue: %d is negative", c.Limits.Queue)
	}
	if err := c.validateJournal(); err != nil {
		return err
	}
	return c.validateDevices()
}

// MinJournalAge is the shortest journal.max_age: a dedupe window shorter
// than a minute would take the retries of a slow network as new commands.
// (Age never prunes an open in-doubt command; see persist's pruneDevice.)
const MinJournalAge = time.Minute

// validateJournal checks the retention against what a device can have in
// flight: its queue, the command in the driver and one accepted command
// waiting for queue space. A journal that holds fewer could prune by count,
// at a restart, commands found in doubt — and a retry of one would be
// applied as a new command.
func (c Config) validateJournal() error {
	if minRecords := c.Limits.Queue + 2; c.Journal.MaxRecords < minRecords {
		return fmt.Errorf("journal.max_records: %d is below limits.queue + 2 (%d), the commands a device can have accepted at once",
			c.Journal.MaxRecords, minRecords)
	}
	if c.Journal.MaxAge < MinJournalAge {
		return fmt.Errorf("journal.max_age: %v is under %v", c.Journal.MaxAge, MinJournalAge)
	}
	return nil
}

func (c Config) validateDevices() error {
	if len(c.Devices) == 0 {
		return fmt.Errorf("devices: at least one device is required")
	}
	seen := map[string]int{}
	for i, d := range c.Devices {
		key := fmt.Sprintf("devices[%d]", i)
		if !fence.ValidID(d.ID) {
			return fmt.Errorf("%s.id: %q must be 1..128 of [A-Za-z0-9._-]", key, d.ID)
		}
		if j, dup := seen[d.ID]; dup {
			return fmt.Errorf("%s.id: %q is already devices[%d]", key, d.ID, j)
		}
		seen[d.ID] = i
		if !fence.ValidID(d.Domain) {
			return fmt.Errorf("%s.domain: %q must be 1..128 of [A-Za-z0-9._-]", key, d.Domain)
		}
		if d.Driver == "" {
			return fmt.Errorf("%s.driver: missing", key)
		}
		if d.Timeout < 0 {
			return fmt.Errorf("%s.timeout: %v is negative", key, d.Timeout)
		}
	}
	return nil
}

// client is the transport configuration for the broker (Broker set).
func (m MQTTConfig) client() mqtt.Config {
	return mqtt.Config{Broker: m.Broker, ClientID: m.ClientID, Username: m.Username, Password: m.Password, TLS: m.TLS,
		KeepAlive: m.KeepAlive, ConnectTimeout: m.ConnectTimeout, MaxReconnectInterval: m.MaxReconnectInterval}
}

func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// sanitizeID turns a host name into a valid id.
func sanitizeID(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x80 && fence.ValidID(string(r)) {
			return r
		}
		return '-'
	}, s)
	if s == "" {
		return "agent"
	}
	return s[:min(len(s), fence.MaxIDLen)]
}
