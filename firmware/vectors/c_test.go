package vectors

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/firmware/internal/cbuild"
)

var summary = regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed$`)

// runChecker builds test_vectors and runs it on dir; it returns the
// program's output and whether it exited 0.
func runChecker(t *testing.T, dir string) (string, bool) {
	t.Helper()
	bin := cbuild.Build(t, t.TempDir(), "test_vectors", nil, "tests/testutil.c", "tests/test_vectors.c")
	out, err := exec.Command(bin, dir).CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	return string(out), err == nil
}

// TestCLibraryMatchesGoVectors: the C library gives exactly Go's answer for
// every committed vector (TestVectorsUpToDate keeps those equal to what Go
// gives now).
func TestCLibraryMatchesGoVectors(t *testing.T) {
	cbuild.Require(t, "libsodium")
	out, ok := runChecker(t, testdata)
	m := summary.FindStringSubmatch(out)
	if !ok || m == nil || m[2] != "0" {
		t.Fatalf("C vector check failed:\n%s", out)
	}
	t.Logf("C vector check: %s", m[0])
}

// TestCVectorCheckCanFail: the checker is not a rubber stamp. A copy of the
// vectors with one answer changed in each file must fail it, each change
// reported.
func TestCVectorCheckCanFail(t *testing.T) {
	cbuild.Require(t, "libsodium")
	dir := t.TempDir()
	edits := map[string][2]string{
		"tokens.txt":    {" ok ok 56475aa75463474c 1767225600000 42 ", " signature ok 56475aa75463474c 1767225600000 42 "},
		"mutations.txt": {"\nsub 0 ppppp", "\nsub 0 opppp"},
		"positions.txt": {"\npos 0 0 0 1 -1\n", "\npos 0 0 0 1 1\n"},
		"fence.txt":     {" conflict ", " same_lease "},
	}
	for _, name := range Files {
		b, err := os.ReadFile(filepath.Join(testdata, name))
		if err != nil {
			t.Fatal(err)
		}
		e := edits[name]
		if !bytes.Contains(b, []byte(e[0])) {
			t.Fatalf("%s has no %q to change", name, e[0])
		}
		b = bytes.Replace(b, []byte(e[0]), []byte(e[1]), 1)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, ok := runChecker(t, dir)
	if ok {
		t.Fatalf("the checker passed vectors with four wrong answers:\n%s", out)
	}
	for _, want := range []string{"valid-doc-example: verify ok, Go says signature", "valid-doc-example sub at 0",
		"position 0.0 vs 0.1: C -1, Go 1", "Go same_lease"} {
		if !strings.Contains(out, want) {
			t.Errorf("checker output lacks %q:\n%s", want, out)
		}
	}
}

// TestCDifferentialRandomChanges feeds the C oracle seeded random changes
// of valid tokens — byte edits of the wire form, and edits of the body
// re-signed with a trusted key so they reach the body rules behind a valid
// signature — and requires Go's answer (Verify and ParseUnverified) for
// every one: in particular the C library never accepts what Go rejects.
func TestCDifferentialRandomChanges(t *testing.T) {
	cbuild.Require(t, "libsodium")
	g := mustGen(t)
	oracle := cbuild.Build(t, t.TempDir(), "oracle", nil, "tests/testutil.c", "tests/oracle.c")
	inputs := g.randomChanges(t, rand.New(rand.NewPCG(19, 2)), randomInputs)
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
	accepted, i := 0, 0
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
	if accepted < randomInputs/200 {
		t.Errorf("only %d of the random tokens verify: the re-signed edits do not reach the valid paths", accepted)
	}
}

func hexOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return hex.EncodeToString([]byte(s))
}

func (g *gen) answerText(t *testing.T, wire string) string {
	a := g.answer(wire)
	v, _, err := reasonOf(a.verify)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := reasonOf(a.parse)
	if err != nil {
		t.Fatal(err)
	}
	return v + " " + p
}

// randomChanges returns n inputs: each a valid token with 1..3 random wire
// edits, or its body with 1..3 random byte edits, re-signed.
func (g *gen) randomChanges(t *testing.T, r *rand.Rand, n int) []string {
	valid, err := g.validTokens()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, n)
	for len(out) < n {
		base := valid[r.IntN(len(valid))].wire
		if r.IntN(2) == 0 {
			out = append(out, string(editBytes(r, []byte(base))))
			continue
		}
		tok, err := fence.ParseUnverified(base)
		if err != nil {
			t.Fatal(err)
		}
		seed := TrustedSeeds[0]
		if tok.KeyID != g.signers[0].KeyID() {
			seed = TrustedSeeds[1]
		}
		out = append(out, signed(seed, editBytes(r, bodyOf(tok).bytes())))
	}
	return out
}

// editBytes applies 1..3 random edits: set a byte (to anything, or to a
// small value such as a length or version would be), delete, insert,
// truncate.
func editBytes(r *rand.Rand, b []byte) []byte {
	b = append([]byte(nil), b...)
	for range 1 + r.IntN(3) {
		if len(b) == 0 {
			b = append(b, byte(r.IntN(256)))
			continue
		}
		i := r.IntN(len(b))
		switch r.IntN(5) {
		case 0:
			b[i] = byte(r.IntN(256))
		case 1:
			b[i] = byte(r.IntN(4))
		case 2:
			b = append(b[:i], b[i+1:]...)
		case 3:
			b = append(b[:i], append([]byte{"A.-_=\x00\x80"[r.IntN(7)]}, b[i:]...)...)
		default:
			b = b[:i]
		}
	}
	return b
}
