// Package yamlcfg decodes YAML configuration strictly: an unknown key or a
// value of the wrong type is an error that names the key path (for example
// "devices[1].settings.latency") and the value, so an operator can fix the
// file without reading Go.
package yamlcfg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

var nodeType = reflect.TypeOf(yaml.Node{})

// Decode parses one YAML document from data into out (a pointer to a
// struct). An empty document leaves out unchanged.
func Decode(data []byte, out any) error {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err // yaml.v3's errors already read "yaml: line N: …"
	}
	if len(doc.Content) == 0 {
		return nil
	}
	return DecodeNode(doc.Content[0], out, "")
}

// DecodeNode decodes node into out (a pointer), checking every mapping key
// against the yaml tags of the struct it fills. path prefixes key paths in
// errors ("" at the top). A field of type yaml.Node or *yaml.Node receives
// its node undecoded, for a later DecodeNode by whoever knows its shape.
func DecodeNode(node *yaml.Node, out any, path string) error {
	v := reflect.ValueOf(out)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("yamlcfg: DecodeNode needs a non-nil pointer, got %T", out)
	}
	return decode(node, v.Elem(), path)
}

func decode(node *yaml.Node, v reflect.Value, path string) error {
	if node.Kind == yaml.AliasNode {
		node = node.Alias
	}
	switch {
	case v.Type() == nodeType:
		v.Set(reflect.ValueOf(*node))
		return nil
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return decode(node, v.Elem(), path)
	case v.Kind() == reflect.Struct && !isScalarStruct(v):
		return decodeStruct(node, v, path)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() != reflect.Uint8:
		return decodeSlice(node, v, path)
	}
	if err := node.Decode(v.Addr().Interface()); err != nil {
		return fmt.Errorf("%s: value %q: %s", orTop(path), node.Value, cleanYAMLError(err))
	}
	return nil
}

// isScalarStruct reports structs that decode themselves from a scalar.
func isScalarStruct(v reflect.Value) bool {
	_, ok := v.Addr().Interface().(yaml.Unmarshaler)
	return ok
}

func decodeStruct(node *yaml.Node, v reflect.Value, path string) error {
	if node.Kind != yaml.MappingNode {
		if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
			return nil
		}
		return fmt.Errorf("%s: want a mapping of keys, got %q", orTop(path), node.Value)
	}
	fields := fieldsByKey(v.Type())
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, val := node.Content[i].Value, node.Content[i+1]
		idx, ok := fields[key]
		if !ok {
			return fmt.Errorf("%s: unknown key (known keys: %s)", join(path, key), knownKeys(fields))
		}
		if err := decode(val, v.FieldByIndex(idx), join(path, key)); err != nil {
			return err
		}
	}
	return nil
}

func decodeSlice(node *yaml.Node, v reflect.Value, path string) error {
	if node.Kind != yaml.SequenceNode {
		return fmt.Errorf("%s: want a list, got %q", orTop(path), node.Value)
	}
	s := reflect.MakeSlice(v.Type(), len(node.Content), len(node.Content))
	for i, item := range node.Content {
		if err := decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	v.Set(s)
	return nil
}

// fieldsByKey maps yaml keys to field index paths; fields tagged "-" or
// unexported are left out. A field without a tag is keyed by its lower-cased
// name, as yaml.v3 does; the keys of a struct field tagged ",inline" are
// keys of t itself.
func fieldsByKey(t reflect.Type) map[string][]int {
	m := make(map[string][]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
			continue
		case name == "" && opts == "inline" && f.Type.Kind() == reflect.Struct:
			for k, idx := range fieldsByKey(f.Type) {
				m[k] = append([]int{i}, idx...)
			}
			continue
		case name == "":
			name = strings.ToLower(f.Name)
		}
		m[name] = []int{i}
	}
	return m
}

func knownKeys(fields map[string][]int) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orTop(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

// cleanYAMLError drops yaml.v3's "yaml: unmarshal errors:\n  line N:" framing.
func cleanYAMLError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "yaml: unmarshal errors:\n")
	return strings.TrimSpace(s)
}
