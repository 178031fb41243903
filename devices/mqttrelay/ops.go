package mqttrelay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/fencegate/fencegate/devices"
)

// opSpec is one op, templates parsed; read-only after Open.
type opSpec struct {
	Op
	payload *template.Template
	expect  *template.Template // Confirm.Equals or Confirm.Pattern; nil without Confirm
	timeout time.Duration
}

func newOpSpecs(c Config) map[string]*opSpec {
	specs := make(map[string]*opSpec, len(c.Ops))
	for _, op := range c.Ops {
		s := &opSpec{Op: op, payload: template.Must(parseTemplate(op.Payload))}
		if cf := op.Confirm; cf != nil {
			s.expect = template.Must(parseTemplate(cf.Equals + cf.Pattern))
			s.timeout = cf.Timeout
			if s.timeout == 0 {
				s.timeout = c.Timeout
			}
		}
		specs[op.Name] = s
	}
	return specs
}

// parseArgs decodes a command's args: a JSON object, or absent.
func parseArgs(raw json.RawMessage) (map[string]any, error) {
	args := map[string]any{}
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return args, nil
	}
	if err := json.Unmarshal(t, &args); err != nil {
		return nil, devices.Errorf(devices.CodeDeviceError, "args must be a JSON object: %v", err)
	}
	return args, nil
}

func render(t *template.Template, args map[string]any) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, args); err != nil {
		return "", devices.Errorf(devices.CodeDeviceError, "args do not fill the template: %v", err)
	}
	return b.String(), nil
}

// matcher returns the predicate a confirmation must satisfy for args: it
// returns the matched value and whether payload confirms.
func (s *opSpec) matcher(args map[string]any) (func([]byte) (string, bool), error) {
	want, err := render(s.expect, args)
	if err != nil {
		return nil, err
	}
	test := func(v string) bool { return v == want }
	if s.Confirm.Pattern != "" {
		re, err := regexp.Compile(want)
		if err != nil {
			return nil, devices.Errorf(devices.CodeDeviceError, "confirm pattern %q: %v", want, err)
		}
		test = re.MatchString
	}
	field := s.Confirm.JSONField
	return func(payload []byte) (string, bool) {
		v, ok := valueOf(payload, field)
		return v, ok && test(v)
	}, nil
}

// valueOf is the payload, or with field set the value at that dot path in
// a JSON object payload: a string as is, other JSON as its text.
func valueOf(payload []byte, field string) (string, bool) {
	if field == "" {
		return string(payload), true
	}
	raw := json.RawMessage(payload)
	for _, key := range strings.Split(field, ".") {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return "", false
		}
		var ok bool
		if raw, ok = obj[key]; !ok {
			return "", false
		}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return string(bytes.TrimSpace(raw)), true
}

// output is an applied command's output.
func output(fields map[string]string) json.RawMessage {
	b, err := json.Marshal(fields)
	if err != nil {
		panic(fmt.Sprintf("mqttrelay: encode output: %v", err)) // a map of strings always encodes
	}
	return b
}
