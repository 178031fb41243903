package mqttrelay

import (
	"fmt"
	"regexp"
	"text/template"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// Defaults for Config.
const (
	DefaultTimeout = 5 * time.Second
	DefaultOnline  = "Online"
	DefaultOffline = "Offline"
)

// Config is the settings of a device with driver "mqttrelay". Zero values
// mean defaults.
type Config struct {
	// Broker is the controller's broker URL; default the agent's own broker.
	Broker string `yaml:"broker"`
	// ClientID default "fencegate-relay-<device>"; unique on the broker.
	ClientID string `yaml:"client_id"`
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// Timeout bounds a confirmation for ops without their own. Default 5 s.
	Timeout time.Duration `yaml:"timeout"`
	// Availability is the controller's LWT; absent means always available.
	Availability *Availability `yaml:"availability"`
	// Ops lists the device's operations; at least one.
	Ops []Op `yaml:"ops"`
}

// Availability describes the controller's LWT topic.
type Availability struct {
	Topic string `yaml:"topic"`
	// Online and Offline are the payloads; default "Online" and "Offline".
	Online  string `yaml:"online"`
	Offline string `yaml:"offline"`
}

// Op is one operation: what to publish and how it is confirmed.
type Op struct {
	// Name is the op name, 1..128 of [A-Za-z0-9._-].
	Name string `yaml:"name"`
	// Topic is the command topic, e.g. cmnd/plug1/POWER.
	Topic string `yaml:"topic"`
	// Payload is a text/template over the command's args object, e.g.
	// "{{.state}}"; a missing arg is device_error.
	Payload string `yaml:"payload"`
	// Retain must be false: a retained command would be replayed by the
	// broker to the controller whenever it reconnects, long after the
	// agent's fence check. The key exists so that Validate can say so.
	Retain bool `yaml:"retain"`
	// Idempotent declares the op safe to re-apply when in doubt.
	Idempotent bool `yaml:"idempotent"`
	// Confirm is the confirmation rule; absent means the broker's PUBACK
	// is the confirmation.
	Confirm *Confirm `yaml:"confirm"`
}

// Confirm is how a command's effect is confirmed.
type Confirm struct {
	// Topic is the state or result topic, e.g. stat/plug1/RESULT.
	Topic string `yaml:"topic"`
	// JSONField, if set, is a dot path into a JSON object payload (e.g.
	// "POWER"); its value (a string, or other JSON as text) is matched
	// instead of the whole payload. Payloads without it are skipped.
	JSONField string `yaml:"json_field"`
	// Equals is a template (like Op.Payload) the value must equal.
	Equals string `yaml:"equals"`
	// Pattern is a template yielding a regular expression (RE2) the value
	// must match. Exactly one of Equals and Pattern is set.
	Pattern string `yaml:"pattern"`
	// Timeout default Config.Timeout.
	Timeout time.Duration `yaml:"timeout"`
}

// Validate reports the first bad value, naming its key under prefix.
func (c Config) Validate(prefix string) error {
	if c.Timeout < 0 {
		return fmt.Errorf("%s.timeout: %v is negative", prefix, c.Timeout)
	}
	if a := c.Availability; a != nil && !validTopic(a.Topic) {
		return fmt.Errorf("%s.availability.topic: %q must be one topic, without wildcards", prefix, a.Topic)
	}
	if len(c.Ops) == 0 {
		return fmt.Errorf("%s.ops: at least one op is required", prefix)
	}
	seen := map[string]bool{}
	for i, op := range c.Ops {
		key := fmt.Sprintf("%s.ops[%d]", prefix, i)
		if seen[op.Name] {
			return fmt.Errorf("%s.name: %q is listed twice", key, op.Name)
		}
		seen[op.Name] = true
		if err := op.validate(key); err != nil {
			return err
		}
	}
	return nil
}

func (o Op) validate(key string) error {
	switch {
	case !fence.ValidID(o.Name):
		return fmt.Errorf("%s.name: %q must be 1..128 of [A-Za-z0-9._-]", key, o.Name)
	case !validTopic(o.Topic):
		return fmt.Errorf("%s.topic: %q is not a topic to publish to", key, o.Topic)
	case o.Retain:
		return fmt.Errorf("%s.retain: %v is not allowed for command topic %q: the broker would replay the command to the controller on every reconnect, after the fence check", key, o.Retain, o.Topic)
	}
	if _, err := parseTemplate(o.Payload); err != nil {
		return fmt.Errorf("%s.payload: %q: %w", key, o.Payload, err)
	}
	if o.Confirm != nil {
		return o.Confirm.validate(key + ".confirm")
	}
	return nil
}

func (c Confirm) validate(key string) error {
	switch {
	case !validTopic(c.Topic):
		return fmt.Errorf("%s.topic: %q must be one topic, without wildcards", key, c.Topic)
	case (c.Equals == "") == (c.Pattern == ""):
		return fmt.Errorf("%s: exactly one of equals (%q) and pattern (%q) is required", key, c.Equals, c.Pattern)
	case c.Timeout < 0:
		return fmt.Errorf("%s.timeout: %v is negative", key, c.Timeout)
	}
	tmpl := c.Equals + c.Pattern
	if _, err := parseTemplate(tmpl); err != nil {
		return fmt.Errorf("%s: %q: %w", key, tmpl, err)
	}
	if c.Pattern != "" && !hasAction(c.Pattern) {
		if _, err := regexp.Compile(c.Pattern); err != nil {
			return fmt.Errorf("%s.pattern: %q: %w", key, c.Pattern, err)
		}
	}
	return nil
}

func validTopic(t string) bool {
	for _, r := range t {
		if r == '+' || r == '#' || r == 0 {
			return false
		}
	}
	return t != ""
}

func parseTemplate(s string) (*template.Template, error) {
	return template.New("").Option("missingkey=error").Parse(s)
}

func hasAction(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '{' && s[i+1] == '{' {
			return true
		}
	}
	return false
}

// withDefaults returns c with zero values replaced by their defaults.
func (c Config) withDefaults(device, broker string) Config {
	if c.Broker == "" {
		c.Broker = broker
	}
	if c.ClientID == "" {
		c.ClientID = "fencegate-relay-" + device
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if a := c.Availability; a != nil {
		a2 := *a
		a2.Online = orString(a2.Online, DefaultOnline)
		a2.Offline = orString(a2.Offline, DefaultOffline)
		c.Availability = &a2
	}
	return c
}

func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
