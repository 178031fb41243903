package yamlcfg

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

type inner struct {
	Latency time.Duration `yaml:"latency"`
	Count   int           `yaml:"count"`
}

type outer struct {
	Name    string `yaml:"name"`
	Devices []struct {
		ID       string    `yaml:"id"`
		Settings yaml.Node `yaml:"settings"`
		Inner    inner     `yaml:"inner"`
	} `yaml:"devices"`
	Ptr  *inner         `yaml:"ptr"`
	Tags map[string]int `yaml:"tags"`
}

func TestDecodeErrorsNameKeyAndValue(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"unknown top key", "nmae: x", "nmae: unknown key (known keys: devices, name, ptr, tags)"},
		{"unknown nested key", "devices:\n  - id: a\n    inner: {latencyy: 1s}", "devices[0].inner.latencyy: unknown key"},
		{"wrong type", "devices:\n  - id: a\n    inner: {count: many}", `devices[0].inner.count: value "many"`},
		{"bad duration", "ptr: {latency: soon}", `ptr.latency: value "soon"`},
		{"list expected", "devices: 3", `devices: want a list, got "3"`},
		{"mapping expected", "ptr: 3", `ptr: want a mapping of keys, got "3"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var o outer
			err := Decode([]byte(tc.doc), &o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestDecodeFillsValuesAndKeepsRawNodes(t *testing.T) {
	doc := "name: gw\ndevices:\n  - id: a\n    settings: {ops: [set]}\n    inner: {latency: 5ms, count: 2}\nptr: {count: 7}\ntags: {x: 1}\n"
	var o outer
	if err := Decode([]byte(doc), &o); err != nil {
		t.Fatal(err)
	}
	if o.Name != "gw" || len(o.Devices) != 1 || o.Devices[0].Inner.Latency != 5*time.Millisecond ||
		o.Devices[0].Inner.Count != 2 || o.Ptr == nil || o.Ptr.Count != 7 || o.Tags["x"] != 1 {
		t.Fatalf("decoded %+v", o)
	}
	var settings struct {
		Ops []string `yaml:"ops"`
	}
	if err := DecodeNode(&o.Devices[0].Settings, &settings, "devices[0].settings"); err != nil {
		t.Fatal(err)
	}
	if len(settings.Ops) != 1 || settings.Ops[0] != "set" {
		t.Fatalf("settings %+v", settings)
	}
}

func TestEmptyDocumentLeavesDefaults(t *testing.T) {
	o := outer{Name: "default"}
	if err := Decode(nil, &o); err != nil || o.Name != "default" {
		t.Fatalf("%v %+v", err, o)
	}
}

// TestInlineAndSyntaxErrors: the keys of an inlined struct are the outer
// mapping's (and named with the outer path in errors); a syntax error
// reads "yaml: line N: …" once, not "yaml: yaml: …".
func TestInlineAndSyntaxErrors(t *testing.T) {
	type Conn struct {
		Broker string `yaml:"broker"`
		Port   int    `yaml:"port"`
	}
	type outer struct {
		MQTT struct {
			Conn     `yaml:",inline"`
			Prefixes []string `yaml:"prefixes"`
		} `yaml:"mqtt"`
	}
	var o outer
	if err := Decode([]byte("mqtt: {broker: tcp://b:1883, prefixes: [a/]}"), &o); err != nil || o.MQTT.Broker != "tcp://b:1883" || len(o.MQTT.Prefixes) != 1 {
		t.Fatalf("inline: %+v, %v", o, err)
	}
	tests := []struct{ name, doc, want string }{
		{"inline key, bad value", "mqtt: {port: many}", "mqtt.port: value \"many\": line 1: cannot unmarshal !!str `many` into int"},
		{"unknown key beside inline", "mqtt: {brokr: x}", "mqtt.brokr: unknown key (known keys: broker, port, prefixes)"},
		{"syntax", "mqtt: [\n", "yaml: line 1: did not find expected node content"},
	}
	for _, tt := range tests {
		var o outer
		if err := Decode([]byte(tt.doc), &o); err == nil || err.Error() != tt.want {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
