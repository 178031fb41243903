package vectors

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/persist"
)

var update = flag.Bool("update", false, "rewrite firmware/c/testdata from the generator")

// testdata is the committed vector directory, seen from this package.
const testdata = "../c/testdata"

// TestVectorsUpToDate regenerates every vector file into a temporary
// directory and requires the committed files to be byte for byte the
// same, so the Go implementation and the C vectors cannot drift apart
// (with -update it rewrites them instead).
func TestVectorsUpToDate(t *testing.T) {
	dir := t.TempDir()
	if *update {
		dir = testdata
	}
	if err := Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range Files {
		fresh, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(filepath.Join(testdata, name))
		if err != nil {
			t.Fatalf("%v: run go generate ./firmware/vectors", err)
		}
		if !bytes.Equal(fresh, committed) {
			t.Errorf("%s differs from what the Go implementation gives now (first difference at byte %d); "+
				"run go generate ./firmware/vectors and review the diff", name, firstDiff(fresh, committed))
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestBuilderMatchesSigner: the vectors' own body encoder lays out valid
// tokens exactly as fence.Signer does, so the crafted invalid bodies are
// the layout of docs/protocol.md with one thing changed.
func TestBuilderMatchesSigner(t *testing.T) {
	g := mustGen(t)
	valid, err := g.validTokens()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range valid {
		tok, err := fence.ParseUnverified(v.wire)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		seed := TrustedSeeds[0]
		if tok.KeyID != g.signers[0].KeyID() {
			seed = TrustedSeeds[1]
		}
		if got := signed(seed, bodyOf(tok).bytes()); got != v.wire {
			t.Errorf("%s: builder gives\n%s\nsigner gave\n%s", v.name, got, v.wire)
		}
	}
}

// TestEveryReasonHasVectors: tokens.txt rejects with every reason of
// docs/protocol.md that a single token can have, and accepts its valid
// tokens; the mutation lines include each of those codes too.
func TestEveryReasonHasVectors(t *testing.T) {
	g := mustGen(t)
	text, err := g.tokensFile()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[0] == "tok" {
			seen[f[3]]++
		}
	}
	for _, r := range reasons {
		if r.err == fence.ErrDomainMismatch {
			continue // a reason of comparisons: positions.txt
		}
		if seen[r.name] == 0 {
			t.Errorf("no token vector is rejected %s", r.name)
		}
	}
	if seen["ok"] < 5 {
		t.Errorf("only %d valid tokens", seen["ok"])
	}
}

// TestDecideMatchesPersist runs every same-domain step of the fence
// sequences through the agent's fence store (persist.Store.Raise) and
// requires its outcome to be Decide's: the fence rule the C library is held
// to is the rule the agent enforces.
func TestDecideMatchesPersist(t *testing.T) {
	g := mustGen(t)
	seqs, err := g.sequences()
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for i, s := range seqs {
		store, err := persist.Open(filepath.Join(t.TempDir(), "fence.db"), persist.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var f fence.Token
		for j, st := range s.steps {
			if st.Reopen || st.Token.Domain != s.Domain {
				continue
			}
			want := Decide(s.Domain, f, st.Token)
			d, err := store.Raise(context.Background(), st.Token)
			if err != nil {
				t.Fatal(err)
			}
			if got := persistOutcome(d); got != want {
				t.Fatalf("sequence %d step %d (%s on %s): persist says %s, Decide %s", i, j, st.Token, fenceText(f), got, want)
			}
			if want == Newer {
				f = st.Token
			}
			compared++
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if compared < 200 {
		t.Fatalf("only %d steps compared", compared)
	}
}

func persistOutcome(d persist.Decision) string {
	switch {
	case d.Outcome == persist.Accepted && d.Raised:
		return Newer
	case d.Outcome == persist.Accepted:
		return SameLease
	case d.Outcome == persist.Stale:
		return Stale
	case d.Outcome == persist.Conflict:
		return Conflict
	}
	return d.Outcome.String()
}

func mustGen(t *testing.T) *gen {
	t.Helper()
	g, err := newGen()
	if err != nil {
		t.Fatal(err)
	}
	return g
}
