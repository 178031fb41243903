package line

import (
	"fmt"
	"regexp"
	"text/template"

	"github.com/fencegate/fencegate/transport/serial"
)

// opSpec is a compiled op.
type opSpec struct {
	OpConfig
	tmpl  *template.Template
	match matcher
	args  map[string]argSpec
}

// argSpec is a compiled arg declaration.
type argSpec struct {
	ArgConfig
	pattern *regexp.Regexp
}

// compile validates c and compiles its ops.
func compile(c Config) (map[string]opSpec, error) {
	if err := c.validatePort(); err != nil {
		return nil, err
	}
	ops := make(map[string]opSpec, len(c.Ops))
	seen := map[string]bool{}
	for i, oc := range c.Ops {
		key := fmt.Sprintf("ops[%d]", i)
		if err := checkOpName(key, oc, seen); err != nil {
			return nil, err
		}
		op, err := compileOp(key, oc)
		if err != nil {
			return nil, err
		}
		ops[oc.Name] = op
	}
	return ops, nil
}

func compileOp(key string, oc OpConfig) (opSpec, error) {
	op := opSpec{OpConfig: oc, args: map[string]argSpec{}}
	var err error
	if oc.Request == "" {
		return op, &serial.ConfigError{Key: key + ".request", Value: "", Reason: "a request template is required"}
	}
	if op.tmpl, err = template.New(oc.Name).Option("missingkey=error").Parse(oc.Request); err != nil {
		return op, &serial.ConfigError{Key: key + ".request", Value: oc.Request, Reason: err.Error()}
	}
	if op.match, err = compileMatcher(key, oc.OK, oc.Error); err != nil {
		return op, err
	}
	for j, ac := range oc.Args {
		a, err := compileArg(fmt.Sprintf("%s.args[%d]", key, j), ac, op.args)
		if err != nil {
			return op, err
		}
		op.args[ac.Name] = a
	}
	return op, nil
}

func compileArg(key string, ac ArgConfig, seen map[string]argSpec) (argSpec, error) {
	a := argSpec{ArgConfig: ac}
	if a.Type == "" {
		a.Type = "string"
	}
	switch {
	case !validArgName(ac.Name):
		return a, &serial.ConfigError{Key: key + ".name", Value: ac.Name, Reason: "must be a template identifier ([A-Za-z_][A-Za-z0-9_]*)"}
	case seen[ac.Name].Name != "":
		return a, &serial.ConfigError{Key: key + ".name", Value: ac.Name, Reason: "is declared twice"}
	case a.Type != "string" && a.Type != "int" && a.Type != "number" && a.Type != "bool":
		return a, &serial.ConfigError{Key: key + ".type", Value: ac.Type, Reason: "must be string, int, number or bool"}
	case ac.Min != nil && ac.Max != nil && *ac.Min > *ac.Max:
		return a, &serial.ConfigError{Key: key + ".max", Value: *ac.Max, Reason: "must be ≥ min"}
	}
	pat := ac.Pattern
	if pat == "" {
		pat = DefaultStringPattern
	}
	var err error
	if a.pattern, err = regexp.Compile(pat); err != nil {
		return a, &serial.ConfigError{Key: key + ".pattern", Value: ac.Pattern, Reason: err.Error()}
	}
	return a, nil
}

var argName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func validArgName(s string) bool { return argName.MatchString(s) }

func compileMatcher(key, ok, errPat string) (matcher, error) {
	var m matcher
	var err error
	if ok == "" {
		return m, &serial.ConfigError{Key: key + ".ok", Value: "", Reason: "a success pattern is required"}
	}
	if m.ok, err = regexp.Compile(ok); err != nil {
		return m, &serial.ConfigError{Key: key + ".ok", Value: ok, Reason: err.Error()}
	}
	if errPat == "" {
		return m, nil
	}
	if m.err, err = regexp.Compile(errPat); err != nil {
		return m, &serial.ConfigError{Key: key + ".error", Value: errPat, Reason: err.Error()}
	}
	return m, nil
}
