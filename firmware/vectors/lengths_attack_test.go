package vectors

import (
	"bufio"
	"bytes"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/firmware/internal/cbuild"
)

// TestAttackSignedBodyEdgesHeld is an attack that HELD (it passes on the
// current code; kept as a record of what was tried). Behind a valid
// signature of a trusted key, it presents the C oracle with the bodies a
// controller would never sign but a parser could get wrong: every pair of
// domain and holder lengths around the limits (0, 1, 127, 128, 129, 200,
// 254, 255) with the length byte saying one less, exact and one more than
// the bytes that follow, and with a trailing byte; every byte value as the
// first byte of the domain and of the holder; the numeric fields at 0, 1
// and their maxima. C must give Go's answer (Verify and ParseUnverified)
// for every one — in particular never accept what Go refuses.
func TestAttackSignedBodyEdgesHeld(t *testing.T) {
	cbuild.Require(t, "libsodium")
	g := mustGen(t)
	oracle := cbuild.Build(t, t.TempDir(), "oracle", nil, "tests/testutil.c", "tests/oracle.c")
	inputs := edgeBodies(g)
	var stdin bytes.Buffer
	for _, w := range inputs {
		stdin.WriteString(hexOrDash(w) + "\n")
	}
	cmd := exec.Command(oracle, filepath.Join(testdata, "tokens.txt"))
	cmd.Stdin = &stdin
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	i, accepted := 0, 0
	for ; sc.Scan(); i++ {
		want := g.answerText(t, inputs[i])
		if sc.Text() != want {
			t.Errorf("input %q: C says %s, Go %s", inputs[i], sc.Text(), want)
		}
		if strings.HasPrefix(want, "ok ") {
			accepted++
		}
	}
	if i != len(inputs) {
		t.Fatalf("oracle answered %d of %d inputs", i, len(inputs))
	}
	if accepted == 0 {
		t.Fatal("no edge body verifies: the grid does not reach the accepting paths")
	}
	t.Logf("%d signed edge bodies, %d accepted by both", len(inputs), accepted)
}

// edgeBodies are the wire forms of TestAttackSignedBodyEdgesHeld, each
// signed with trusted key 0.
func edgeBodies(g *gen) []string {
	ex := g.example()
	var out []string
	lengths := []int{0, 1, 127, 128, 129, 200, 254, 255}
	for _, d := range lengths {
		for _, h := range lengths {
			r := ex
			r.domain, r.holder = strings.Repeat("d", d), strings.Repeat("h", h)
			b := r.bytes()
			out = append(out, signed(0, b), signed(0, append(append([]byte(nil), b...), 'x')))
			dAt, hAt := 37, 38+d
			for _, delta := range []int{-1, 1} {
				if v := d + delta; v >= 0 && v <= 255 {
					out = append(out, signed(0, withByte(b, dAt, byte(v))))
				}
				if v := h + delta; v >= 0 && v <= 255 {
					out = append(out, signed(0, withByte(b, hAt, byte(v))))
				}
			}
		}
	}
	for v := 0; v < 256; v++ {
		b := ex.bytes()
		out = append(out, signed(0, withByte(b, 38, byte(v))), signed(0, withByte(b, 38+len(ex.domain)+1, byte(v))))
	}
	for _, n := range []uint64{0, 1, math.MaxInt64, math.MaxUint64} {
		for field := 0; field < 4; field++ {
			r := ex
			switch field {
			case 0:
				r.epoch = n
			case 1:
				r.seq = n
			case 2:
				r.issuedAt = int64(n)
			default:
				r.ttl = uint32(n)
			}
			out = append(out, signed(0, r.bytes()))
		}
	}
	return out
}
