package simfirmware

import (
	"path/filepath"
	"testing"
)

func TestFenceAdmits(t *testing.T) {
	f := fenceRec{Epoch: 2, Seq: 10, Holder: "a"}
	tests := []struct {
		name       string
		epoch, seq uint64
		holder     string
		want       bool
	}{
		{"older seq", 2, 9, "a", false},
		{"older epoch, higher seq", 1, 99, "a", false},
		{"same lease", 2, 10, "a", true},
		{"same position, other holder", 2, 10, "b", false},
		{"newer seq", 2, 11, "b", true},
		{"newer epoch, lower seq", 3, 1, "b", true},
	}
	for _, tt := range tests {
		if got := f.admits(tt.epoch, tt.seq, tt.holder); got != tt.want {
			t.Errorf("%s: admits = %v, want %v", tt.name, got, tt.want)
		}
	}
	if !(fenceRec{}).admits(1, 1, "x") {
		t.Error("an empty fence must admit any token")
	}
}

func TestFencesSurviveReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fw.state")
	want := map[string]fenceRec{"plant": {Epoch: 1, Seq: 7, Holder: "sup"}}
	if err := storeFences(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := loadFences(path)
	if err != nil || got["plant"] != want["plant"] {
		t.Fatalf("loadFences = %v, %v; want %v", got, err, want)
	}
	if m, err := loadFences(filepath.Join(t.TempDir(), "absent")); err != nil || len(m) != 0 {
		t.Fatalf("absent state file: %v, %v", m, err)
	}
}

func TestGarbleKeepsDelimiters(t *testing.T) {
	in := []byte{0, 5, 1, 2, 3, 4, 0}
	out := garble(in)
	if out[0] != 0 || out[len(out)-1] != 0 || string(out) == string(in) {
		t.Fatalf("garble(% x) = % x", in, out)
	}
}
