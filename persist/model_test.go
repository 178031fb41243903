package persist

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"pgregory.net/rapid"

	"github.com/fencegate/fencegate/fence"
)

// model is the in-memory statement of the store's rules: per device a fence
// and a journal of command states.
type model struct {
	fence   map[string]fence.Token
	journal map[string]map[string]State
}

func (m *model) accept(cmd Command) Outcome {
	st, known := m.journal[cmd.Device][cmd.ID]
	if known && !(cmd.ReapplyInDoubt && st == StateInDoubt) {
		return Duplicate
	}
	o := m.raise(cmd.Device, cmd.Token)
	if o == Accepted {
		if m.journal[cmd.Device] == nil {
			m.journal[cmd.Device] = map[string]State{}
		}
		m.journal[cmd.Device][cmd.ID] = StateAccepted
	}
	return o
}

func (m *model) raise(device string, tok fence.Token) Outcome {
	f, ok := m.fence[device]
	switch {
	case !ok:
	case f.Domain != tok.Domain:
		return WrongDomain
	case tok.Epoch < f.Epoch || tok.Epoch == f.Epoch && tok.Seq < f.Seq:
		return Stale
	case tok.Epoch == f.Epoch && tok.Seq == f.Seq:
		if tok.Holder != f.Holder || tok.IssuedAt != f.IssuedAt {
			return Conflict
		}
		return Accepted
	}
	m.fence[device] = tok
	return Accepted
}

func (m *model) complete(device, id string) bool {
	if m.journal[device][id] != StateAccepted {
		return false
	}
	m.journal[device][id] = StateDone
	return true
}

func (m *model) reopen() {
	for _, j := range m.journal {
		for id, st := range j {
			if st == StateAccepted {
				j[id] = StateInDoubt
			}
		}
	}
}

// TestStoreMatchesModel drives the store and the model with the same random
// operations, reopening the file now and then, and compares every answer and
// the whole state after each step.
func TestStoreMatchesModel(t *testing.T) {
	sg := testSigner(t)
	dir := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		sub, err := os.MkdirTemp(dir, "m")
		if err != nil {
			rt.Fatal(err)
		}
		h := &modelHarness{t: rt, sg: sg, path: filepath.Join(sub, "f.db"),
			m: &model{fence: map[string]fence.Token{}, journal: map[string]map[string]State{}}}
		h.open()
		defer func() { h.s.Close() }()
		rt.Repeat(map[string]func(*rapid.T){
			"accept":   h.accept,
			"complete": h.complete,
			"raise":    h.raise,
			"reopen":   h.reopen,
			"":         h.check,
		})
	})
}

type modelHarness struct {
	t    *rapid.T
	sg   *fence.Signer
	path string
	s    *Store
	m    *model
}

func (h *modelHarness) open() {
	s, err := Open(h.path, Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.s = s
}

func (h *modelHarness) genToken(t *rapid.T) fence.Token {
	domain := rapid.SampledFrom([]string{"plant", "plant", "plant", "yard"}).Draw(t, "domain")
	epoch := rapid.Uint64Range(1, 2).Draw(t, "epoch")
	seq := rapid.Uint64Range(1, 4).Draw(t, "seq")
	holder := rapid.SampledFrom([]string{"A", "B"}).Draw(t, "holder")
	tok, err := h.sg.Sign(fence.Token{Domain: domain, Epoch: epoch, Seq: seq, Holder: holder, IssuedAt: 1, TTLms: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func genDevice(t *rapid.T) string { return rapid.SampledFrom([]string{"p1", "p2"}).Draw(t, "device") }
func genID(t *rapid.T) string     { return fmt.Sprintf("c%d", rapid.IntRange(0, 5).Draw(t, "id")) }

func (h *modelHarness) accept(t *rapid.T) {
	cmd := Command{Device: genDevice(t), ID: genID(t), Token: h.genToken(t), ReapplyInDoubt: rapid.Bool().Draw(t, "reapply")}
	d, err := h.s.Accept(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	if want := h.m.accept(cmd); d.Outcome != want {
		t.Fatalf("accept %s/%s %v: store %v, model %v", cmd.Device, cmd.ID, cmd.Token, d.Outcome, want)
	}
}

func (h *modelHarness) complete(t *rapid.T) {
	dev, id := genDevice(t), genID(t)
	err := h.s.Complete(context.Background(), dev, id, []byte(id))
	if want := h.m.complete(dev, id); (err == nil) != want {
		t.Fatalf("complete %s/%s: store err %v, model ok %v", dev, id, err, want)
	}
}

func (h *modelHarness) raise(t *rapid.T) {
	dev, tok := genDevice(t), h.genToken(t)
	d, err := h.s.Raise(context.Background(), dev, tok)
	if err != nil {
		t.Fatal(err)
	}
	if want := h.m.raise(dev, tok); d.Outcome != want {
		t.Fatalf("raise %s %v: store %v, model %v", dev, tok, d.Outcome, want)
	}
}

func (h *modelHarness) reopen(t *rapid.T) {
	if err := h.s.Close(); err != nil {
		t.Fatal(err)
	}
	h.open()
	h.m.reopen()
}

// check compares the store's fences and journals with the model.
func (h *modelHarness) check(t *rapid.T) {
	fences, err := h.s.Fences()
	if err != nil {
		t.Fatal(err)
	}
	if len(fences) != len(h.m.fence) {
		t.Fatalf("store has %d fences, model %d", len(fences), len(h.m.fence))
	}
	for dev, want := range h.m.fence {
		if got := fences[dev].Token; !got.SameLease(want) {
			t.Fatalf("fence of %s: store %v, model %v", dev, got, want)
		}
	}
	for dev, j := range h.m.journal {
		recs, err := h.s.Journal(dev)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(j) {
			t.Fatalf("journal of %s: store %v, model %v", dev, ids(recs), j)
		}
		for _, r := range recs {
			if j[r.ID] != r.State {
				t.Fatalf("journal %s/%s: store %s, model %s", dev, r.ID, r.State, j[r.ID])
			}
		}
	}
}
