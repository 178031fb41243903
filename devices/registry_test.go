package devices

import (
	"errors"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type keyErr struct{ key string }

func (e *keyErr) Error() string              { return e.key + ": bad" }
func (e *keyErr) PrefixKey(prefix string)    { e.key = prefix + e.key }
func (c relCfg) Validate() error             { return c.check() }
func (c pathCfg) Validate(path string) error { return c.check(path) }

type relCfg struct {
	Rate int `yaml:"rate"`
}

func (c relCfg) check() error {
	if c.Rate < 0 {
		return &keyErr{key: "rate"}
	}
	return nil
}

type pathCfg struct {
	Rate int `yaml:"rate"`
}

func (c pathCfg) check(path string) error {
	if c.Rate < 0 {
		return errors.New(path + ".rate: bad")
	}
	return nil
}

func settings(t *testing.T, doc, path string) Settings {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		t.Fatal(err)
	}
	return Settings{Node: n.Content[0], Path: path}
}

func TestDecodeValidNamesAbsoluteKeys(t *testing.T) {
	tests := []struct {
		name string
		cfg  any
		path string
		doc  string
		want string
	}{
		{"relative keys get the path", &relCfg{}, "devices[2].settings", "rate: -1", "devices[2].settings.rate: bad"},
		{"path validator gets the path", &pathCfg{}, "devices[2].settings", "rate: -1", "devices[2].settings.rate: bad"},
		{"path validator without a path", &pathCfg{}, "", "rate: -1", "settings.rate: bad"},
		{"unknown key", &relCfg{}, "devices[0].settings", "rat: 1", "devices[0].settings.rat: unknown key"},
		{"no Validate method", &struct{}{}, "", "{}", "has no Validate method"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := settings(t, tc.doc, tc.path).DecodeValid(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	var ok relCfg
	if err := settings(t, "rate: 3", "p").DecodeValid(&ok); err != nil || ok.Rate != 3 {
		t.Fatalf("valid settings: %v %+v", err, ok)
	}
}
