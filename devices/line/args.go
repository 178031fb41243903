package line

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// parseArgs checks the command's args (a JSON object, or absent) against
// the op's declarations and returns the template data: int as int64,
// number as float64, bool, string; a missing optional arg as nil.
func (op opSpec) parseArgs(raw json.RawMessage) (map[string]any, error) {
	in := map[string]json.RawMessage{}
	if t := bytes.TrimSpace(raw); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if err := json.Unmarshal(t, &in); err != nil || in == nil {
			return nil, fmt.Errorf("args must be a JSON object")
		}
	}
	for name := range in {
		if _, ok := op.args[name]; !ok {
			return nil, fmt.Errorf("op %q takes no arg %q", op.Name, name)
		}
	}
	data := make(map[string]any, len(op.args))
	for name, a := range op.args {
		v, ok := in[name]
		if !ok {
			if !a.Optional {
				return nil, fmt.Errorf("arg %q is required", name)
			}
			data[name] = nil
			continue
		}
		val, err := a.parse(v)
		if err != nil {
			return nil, fmt.Errorf("arg %q: %w", name, err)
		}
		data[name] = val
	}
	return data, nil
}

// parse checks one arg value against its declaration.
func (a argSpec) parse(raw json.RawMessage) (any, error) {
	switch a.Type {
	case "bool":
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("want true or false")
		}
		return b, nil
	case "int", "number":
		return a.parseNumber(raw)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("want a string")
	}
	if strings.ContainsFunc(s, unicode.IsControl) || !utf8.ValidString(s) {
		return nil, fmt.Errorf("control characters are not allowed")
	}
	if !a.pattern.MatchString(s) {
		return nil, fmt.Errorf("%q does not match %s", s, a.pattern)
	}
	return s, nil
}

func (a argSpec) parseNumber(raw json.RawMessage) (any, error) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("want a number")
	}
	if a.Min != nil && f < *a.Min || a.Max != nil && f > *a.Max {
		return nil, fmt.Errorf("%v is outside %s", f, a.bounds())
	}
	if a.Type == "number" {
		return f, nil
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return nil, fmt.Errorf("want an integer, got %v", f)
	}
	return int64(f), nil
}

func (a argSpec) bounds() string {
	lo, hi := "-∞", "+∞"
	if a.Min != nil {
		lo = fmt.Sprint(*a.Min)
	}
	if a.Max != nil {
		hi = fmt.Sprint(*a.Max)
	}
	return "[" + lo + ", " + hi + "]"
}

// render fills the op's request template. The line must be printable (no
// line break can smuggle a second request) and at most max bytes.
func (op opSpec) render(data map[string]any, max int) (string, error) {
	var b strings.Builder
	if err := op.tmpl.Execute(&b, data); err != nil {
		return "", fmt.Errorf("request template: %w", err)
	}
	s := b.String()
	switch {
	case strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }):
		return "", fmt.Errorf("request %q holds a control character", s)
	case len(s) > max:
		return "", fmt.Errorf("request of %d bytes is longer than max_line %d", len(s), max)
	}
	return s, nil
}
