package modbus

import (
	"fmt"
	"strings"
	"testing"
)

// describe renders requests as "fc@addr×n" (n registers or coils), "+F"
// marking the one with the fence.
func describe(reqs []request) string {
	var parts []string
	for _, r := range reqs {
		addr := int(r.pdu.Data[0])<<8 | int(r.pdu.Data[1])
		n := 1
		if r.pdu.Function == FuncWriteRegisters || r.pdu.Function == FuncWriteCoils {
			n = int(r.pdu.Data[2])<<8 | int(r.pdu.Data[3])
		}
		s := fmt.Sprintf("%02d@%d×%d", r.pdu.Function, addr, n)
		if r.fence {
			s += "+F"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func TestPlanWrite(t *testing.T) {
	status := uint16(1004)
	exc := &fenceSpec{addr: 1000, n: 4}
	st := &fenceSpec{addr: 1000, n: 4, status: &status}
	tests := []struct {
		name  string
		regs  map[uint16]uint16
		coils map[uint16]bool
		fence *fenceSpec
		max   int
		want  string
	}{
		{"one register: FC 06", map[uint16]uint16{100: 1}, nil, nil, 123, "06@100×1"},
		{"adjacent registers: one FC 16", map[uint16]uint16{100: 1, 101: 2, 102: 3}, nil, nil, 123, "16@100×3"},
		{"gap: two requests, ascending", map[uint16]uint16{200: 1, 100: 2, 101: 3}, nil, nil, 123, "16@100×2 06@200×1"},
		{"registers before coils", map[uint16]uint16{5: 1}, map[uint16]bool{3: true, 4: false, 9: true}, nil, 123, "06@5×1 15@3×2 05@9×1"},
		{"split at the limit", map[uint16]uint16{0: 1, 1: 1, 2: 1}, nil, nil, 2, "16@0×2 06@2×1"},
		{"fence alone first", map[uint16]uint16{100: 1}, nil, exc, 123, "16@1000×4+F 06@100×1"},
		{"values after the fence join it", map[uint16]uint16{1004: 7, 1005: 8, 1200: 9}, nil, exc, 123, "16@1000×6+F 06@1200×1"},
		{"values before the fence join it", map[uint16]uint16{998: 7, 999: 8}, nil, exc, 123, "16@998×6+F"},
		{"no join past the limit", map[uint16]uint16{1004: 7, 1005: 8}, nil, exc, 5, "16@1000×4+F 16@1004×2"},
		{"status mode: fence and status alone", map[uint16]uint16{1005: 7}, nil, st, 123, "16@1000×5+F 06@1005×1"},
		{"coils only, with fence", nil, map[uint16]bool{1: true}, exc, 123, "16@1000×4+F 05@1×1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWriteSet()
			for a, v := range tt.regs {
				w.regs[a] = v
			}
			for a, v := range tt.coils {
				w.coils[a] = v
			}
			var block []uint16
			if tt.fence != nil {
				block = make([]uint16, tt.fence.span())
			}
			if got := describe(planWrite(w, tt.fence, block, tt.max)); got != tt.want {
				t.Fatalf("plan %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPlanWriteMarksValues(t *testing.T) {
	w := newWriteSet()
	w.regs[1004] = 1
	reqs := planWrite(w, &fenceSpec{addr: 1000, n: 4}, make([]uint16, 4), 123)
	if len(reqs) != 1 || !reqs[0].fence || !reqs[0].values {
		t.Fatalf("fence with a value in one request: %+v, want fence and values marked", reqs)
	}
	reqs = planWrite(newWriteSet(), &fenceSpec{addr: 1000, n: 4}, make([]uint16, 4), 123)
	if len(reqs) != 1 || reqs[0].values {
		t.Fatalf("fence alone: %+v, want no values marked", reqs)
	}
}

func TestWriteSetRefusesOverlap(t *testing.T) {
	w := newWriteSet()
	if err := w.addWords("speed", 100, []uint16{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := w.addWords("speed_low", 101, []uint16{3}); err == nil || !strings.Contains(err.Error(), `"speed" and "speed_low"`) {
		t.Fatalf("overlapping points in one write: %v, want a refusal naming both", err)
	}
}

func TestPlanRead(t *testing.T) {
	h := func(name string, addr uint16, typ string) Point {
		return Point{Name: name, Table: Holding, Address: addr, Type: typ, Scale: 1}
	}
	c := func(name string, addr uint16) Point {
		return Point{Name: name, Table: Coils, Address: addr, Type: TypeBool}
	}
	tests := []struct {
		name   string
		points []Point
		max    int
		want   string
	}{
		{"adjacent merge", []Point{h("a", 10, TypeUint16), h("b", 11, TypeUint32)}, 125, "holding@10×3"},
		{"overlap merge", []Point{h("a", 10, TypeUint32), h("lo", 11, TypeUint16)}, 125, "holding@10×2"},
		{"gap not read", []Point{h("a", 10, TypeUint16), h("b", 12, TypeUint16)}, 125, "holding@10×1 holding@12×1"},
		{"limit", []Point{h("a", 0, TypeUint32), h("b", 2, TypeUint32)}, 3, "holding@0×2 holding@2×2"},
		{"tables in order", []Point{h("a", 1, TypeUint16), c("b", 1), c("d", 2)}, 125, "coil@1×2 holding@1×1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var parts []string
			runs := planRead(tt.points, tt.max)
			for _, r := range runs {
				parts = append(parts, fmt.Sprintf("%s@%d×%d", r.table, r.addr, r.n))
			}
			if got := strings.Join(parts, " "); got != tt.want {
				t.Fatalf("plan %s, want %s", got, tt.want)
			}
			for _, p := range tt.points {
				if _, ok := covering(runs, p); !ok {
					t.Fatalf("point %s is in no run", p.Name)
				}
			}
		})
	}
}

func TestFenceWords(t *testing.T) {
	w := FenceWords(LayoutEpochSeq, 0x0001_0203_0405_0607, 0x0809_0A0B_0C0D_0E0F)
	if fmt.Sprintf("%04x", w) != "[0001 0203 0405 0607 0809 0a0b 0c0d 0e0f]" {
		t.Fatalf("epoch_seq words %04x", w)
	}
	if e, s := ParseFenceWords(LayoutEpochSeq, w); e != 0x0001_0203_0405_0607 || s != 0x0809_0A0B_0C0D_0E0F {
		t.Fatalf("parsed back %x %x", e, s)
	}
	// Word-by-word order is position order, across an epoch change too.
	positions := [][2]uint64{{1, 1 << 40}, {2, 0}, {2, 1}, {2, 1 << 16}, {1 << 33, 5}}
	for i := 1; i < len(positions); i++ {
		a := FenceWords(LayoutEpochSeq, positions[i-1][0], positions[i-1][1])
		b := FenceWords(LayoutEpochSeq, positions[i][0], positions[i][1])
		if CompareFenceWords(a, b) >= 0 {
			t.Fatalf("%v does not sort below %v", positions[i-1], positions[i])
		}
	}
	if CompareFenceWords(FenceWords(LayoutSeq, 9, 70000), FenceWords(LayoutSeq, 1, 65535)) <= 0 {
		t.Fatal("seq layout: seq 70000 does not sort above 65535")
	}
}
