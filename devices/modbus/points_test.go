package modbus

import (
	"errors"
	"fmt"
	"testing"
)

func pt(typ string, lowFirst bool, scale, offset float64) Point {
	return Point{Name: "p", Table: Holding, Type: typ, LowFirst: lowFirst, Scale: scale, Offset: offset, Writable: true}
}

// TestPointEncoding: each type and word order puts the engineering value
// in the words a device expects, and reads it back the same.
func TestPointEncoding(t *testing.T) {
	tests := []struct {
		name  string
		p     Point
		value string
		words []uint16
		back  string // the value read back, if not value
	}{
		{"uint16", pt(TypeUint16, false, 1, 0), "65535", []uint16{0xFFFF}, ""},
		{"int16 negative", pt(TypeInt16, false, 1, 0), "-2", []uint16{0xFFFE}, ""},
		{"uint32 high first", pt(TypeUint32, false, 1, 0), "305419896", []uint16{0x1234, 0x5678}, ""},
		{"uint32 low first", pt(TypeUint32, true, 1, 0), "305419896", []uint16{0x5678, 0x1234}, ""},
		{"int32 high first", pt(TypeInt32, false, 1, 0), "-100000", []uint16{0xFFFE, 0x7960}, ""},
		{"int32 low first", pt(TypeInt32, true, 1, 0), "-100000", []uint16{0x7960, 0xFFFE}, ""},
		{"float32 high first", pt(TypeFloat32, false, 1, 0), "1.5", []uint16{0x3FC0, 0x0000}, ""},
		{"float32 low first", pt(TypeFloat32, true, 1, 0), "-0.1", []uint16{0xCCCD, 0xBDCC}, ""},
		{"scaled tenths", pt(TypeUint16, false, 0.1, 0), "12.3", []uint16{123}, ""},
		{"scaled with offset", pt(TypeInt16, false, 0.5, -40), "-40.5", []uint16{0xFFFF}, ""},
		{"scaled float32", pt(TypeFloat32, false, 10, 0), "25", []uint16{0x4020, 0x0000}, ""},
		{"integer given as 3.0", pt(TypeUint16, false, 1, 0), "3.0", []uint16{3}, "3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := tt.p.EncodeWords([]byte(tt.value))
			if err != nil || fmt.Sprint(w) != fmt.Sprint(tt.words) {
				t.Fatalf("EncodeWords(%s) = %04x, %v; want %04x", tt.value, w, err, tt.words)
			}
			want := tt.value
			if tt.back != "" {
				want = tt.back
			}
			if got := string(tt.p.DecodeWords(w)); got != want {
				t.Fatalf("DecodeWords(%04x) = %s, want %s", w, got, want)
			}
		})
	}
}

// TestPointRefusals: values a point cannot hold are refused, never
// wrapped or rounded into another value.
func TestPointRefusals(t *testing.T) {
	tests := []struct {
		name  string
		p     Point
		value string
	}{
		{"uint16 too big", pt(TypeUint16, false, 1, 0), "65536"},
		{"uint16 negative", pt(TypeUint16, false, 1, 0), "-1"},
		{"int16 too small", pt(TypeInt16, false, 1, 0), "-32769"},
		{"uint32 too big", pt(TypeUint32, false, 1, 0), "4294967296"},
		{"int32 too big", pt(TypeInt32, false, 1, 0), "2147483648"},
		{"fraction for an integer", pt(TypeUint16, false, 1, 0), "1.5"},
		{"not a step of the scale", pt(TypeUint16, false, 0.1, 0), "12.34"},
		{"scaled past the range", pt(TypeUint16, false, 0.1, 0), "6553.6"},
		{"float32 overflow", pt(TypeFloat32, false, 1, 0), "1e39"},
		{"string", pt(TypeUint16, false, 1, 0), `"12"`},
		{"bool for a register", pt(TypeUint16, false, 1, 0), "true"},
		{"null", pt(TypeUint16, false, 1, 0), "null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if w, err := tt.p.EncodeWords([]byte(tt.value)); !errors.Is(err, errValue) {
				t.Fatalf("EncodeWords(%s) = %04x, %v; want a refusal", tt.value, w, err)
			}
		})
	}
	coil := Point{Name: "c", Table: Coils, Type: TypeBool}
	if _, err := coil.EncodeBit([]byte("1")); !errors.Is(err, errValue) {
		t.Fatalf("coil given 1: %v, want a refusal (true or false only)", err)
	}
}

func TestFloatNaNReadsNull(t *testing.T) {
	if got := string(pt(TypeFloat32, false, 1, 0).DecodeWords([]uint16{0x7FC0, 0})); got != "null" {
		t.Fatalf("NaN reads %s, want null", got)
	}
}
