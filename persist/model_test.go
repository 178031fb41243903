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

// model is the in-memory statement of the store's rules: per domain a
// fence, per device its highest accepted token, and a journal of commands.
type model struct {
	domain  map[string]fence.Token
	device  map[string]fence.Token
	journal map[string]map[string]modelEntry
}

type modelEntry struct {
	state      State
	digest     string
	idempotent bool
}

func newModel() *model {
	return &model{domain: map[string]fence.Token{}, device: map[string]fence.Token{}, journal: map[string]map[string]modelEntry{}}
}

func modelDigest(cmd Command) string {
	return fmt.Sprint(cmd.Token.Domain, cmd.Token.Epoch, cmd.Token.Seq, cmd.Op)
}

func (m *model) accept(cmd Command) Outcome {
	e, known := m.journal[cmd.Device][cmd.ID]
	switch {
	case known && e.digest != modelDigest(cmd):
		return IDReused
	case known && !(e.idempotent && e.state == StateInDoubt):
		return Duplicate
	}
	if f, ok := m.device[cmd.Device]; ok && f.Domain != cmd.Token.Domain {
		return WrongDomain
	}
	o := m.raise(cmd.Token)
	if o == Accepted {
		if f, ok := m.device[cmd.Device]; !ok || newer(cmd.Token, f) {
			m.device[cmd.Device] = cmd.Token
		}
		if m.journal[cmd.Device] == nil {
			m.journal[cmd.Device] = map[string]modelEntry{}
		}
		m.journal[cmd.Device][cmd.ID] = modelEntry{StateAccepted, modelDigest(cmd), cmd.Idempotent}
	}
	return o
}

func newer(a, b fence.Token) bool { return a.Epoch > b.Epoch || a.Epoch == b.Epoch && a.Seq > b.Seq }

func (m *model) raise(tok fence.Token) Outcome {
	f, ok := m.domain[tok.Domain]
	switch {
	case !ok:
	case newer(f, tok):
		return Stale
	case tok.Epoch == f.Epoch && tok.Seq == f.Seq:
		if tok.Holder != f.Holder || tok.IssuedAt != f.IssuedAt {
			return Conflict
		}
		return Accepted
	}
	m.domain[tok.Domain] = tok
	return Accepted
}

func (m *model) complete(device, id string) bool {
	e := m.journal[device][id]
	if e.state != StateAccepted {
		return false
	}
	e.state = StateDone
	m.journal[device][id] = e
	return true
}

func (m *model) reopen() {
	for _, j := range m.journal {
		for id, e := range j {
			if e.state == StateAccepted {
				e.state = StateInDoubt
				j[id] = e
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
			m: newModel()}
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
	cmd := Command{Device: genDevice(t), ID: genID(t), Token: h.genToken(t),
		Op: rapid.SampledFrom([]string{"set", "set", "pulse"}).Draw(t, "op"), Idempotent: rapid.Bool().Draw(t, "idempotent")}
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
	tok := h.genToken(t)
	d, err := h.s.Raise(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if want := h.m.raise(tok); d.Outcome != want {
		t.Fatalf("raise %v: store %v, model %v", tok, d.Outcome, want)
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
	domains, err := h.s.DomainFences()
	if err != nil {
		t.Fatal(err)
	}
	checkFences(t, "domain", domains, h.m.domain)
	devices, err := h.s.Fences()
	if err != nil {
		t.Fatal(err)
	}
	checkFences(t, "device", devices, h.m.device)
	for dev, j := range h.m.journal {
		recs, err := h.s.Journal(dev)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(j) {
			t.Fatalf("journal of %s: store %v, model %v", dev, ids(recs), j)
		}
		for _, r := range recs {
			if j[r.ID].state != r.State {
				t.Fatalf("journal %s/%s: store %s, model %s", dev, r.ID, r.State, j[r.ID].state)
			}
		}
	}
}

func checkFences(t *rapid.T, kind string, store map[string]Fence, model map[string]fence.Token) {
	if len(store) != len(model) {
		t.Fatalf("store has %d %s fences, model %d", len(store), kind, len(model))
	}
	for k, want := range model {
		if got := store[k].Token; !got.SameLease(want) {
			t.Fatalf("%s fence of %s: store %v, model %v", kind, k, got, want)
		}
	}
}
