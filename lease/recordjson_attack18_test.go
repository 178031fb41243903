package lease_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/boltstore"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/protocol"
)

// a18String draws strings that JSON must carry exactly: ids, and valid
// UTF-8 full of what json.Marshal escapes (quotes, backslashes, control
// bytes, NUL, DEL, '<' '>' '&', U+2028/2029, U+FFFD, astral runes) and
// things that look like the record's own syntax.
func a18String() *rapid.Generator[string] {
	piece := rapid.SampledFrom([]string{"", "a", "Z9._-", `"`, `\`, `\"`, `\u0000`, "\x00", "\x1f", "\x7f", "<", ">", "&",
		"\u2028", "\u2029", "\ufffd", "\U0001F600", "é", "\t\n\r", `,"seq":999,`, `"}`, "]", "fg1.AAAA.BBBB", `{"version":7`})
	return rapid.OneOf(
		rapid.StringMatching(`[A-Za-z0-9._-]{1,128}`),
		rapid.Map(rapid.SliceOfN(piece, 0, 12), func(p []string) string { return strings.Join(p, "") }),
		rapid.String(), // valid UTF-8 by construction
	)
}

func a18Uint() *rapid.Generator[uint64] {
	return rapid.OneOf(rapid.Uint64(), rapid.SampledFrom([]uint64{0, 1, math.MaxUint32, 1 << 53, 1<<53 + 1, math.MaxInt64, math.MaxUint64}))
}

func a18Record(t *rapid.T) lease.Record {
	r := lease.Record{Seq: a18Uint().Draw(t, "seq")}
	if rapid.Bool().Draw(t, "leased") {
		r.Lease = &lease.LeaseRecord{Token: a18String().Draw(t, "token"), Epoch: a18Uint().Draw(t, "epoch"),
			Seq: a18Uint().Draw(t, "lseq"), Holder: a18String().Draw(t, "holder"),
			RequestID: a18String().Draw(t, "rid"), TTLms: a18Uint().Draw(t, "ttl")}
	}
	for i := range rapid.IntRange(0, 6).Draw(t, "n") {
		r.Requests = append(r.Requests, lease.RequestRecord{ID: a18String().Draw(t, fmt.Sprint("id", i)),
			Holder: a18String().Draw(t, fmt.Sprint("qh", i)), Seq: a18Uint().Draw(t, fmt.Sprint("qs", i)),
			AtMs:  rapid.OneOf(rapid.Int64(), rapid.SampledFrom([]int64{math.MinInt64, -1, 0, math.MaxInt64})).Draw(t, fmt.Sprint("at", i)),
			TTLms: a18Uint().Draw(t, fmt.Sprint("qt", i))})
	}
	// lease.Record: requests ascend strictly by seq.
	slices.SortStableFunc(r.Requests, func(a, b lease.RequestRecord) int { return cmp.Compare(a.Seq, b.Seq) })
	r.Requests = slices.CompactFunc(r.Requests, func(a, b lease.RequestRecord) bool { return a.Seq == b.Seq })
	return r
}

// a18Successor makes next's requests a legal successor of prev's: a
// request under a seq prev also has is prev's, unchanged (lease.Record:
// an entry never changes once stored, only drops out).
func a18Successor(prev, next lease.Record) lease.Record {
	for i, q := range next.Requests {
		for _, p := range prev.Requests {
			if p.Seq == q.Seq {
				next.Requests[i] = p
			}
		}
	}
	return next
}

// A record of valid UTF-8 strings and any numbers survives a real bbolt
// store exactly — through Put (AppendJSON), a second Put over it (the
// store's version fast path reads AppendJSON's output), Load, a reopen
// and Scan. A record that came back different after a controller restart
// would restart a domain at another seq (I1) or lose its remembered
// requests.
func TestAttack18RecordRoundTripsThroughBoltstore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := map[string]lease.Record{}
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		domain := fmt.Sprintf("dom-%d", n)
		first, second := a18Record(rt), a18Record(rt)
		for _, r := range []lease.Record{first, second} {
			for _, s := range a18Strings(r) {
				if !utf8.ValidString(s) {
					rt.Fatalf("generator drew invalid UTF-8 %q", s)
				}
			}
		}
		put, err := st.Put(ctx, domain, first)
		if err != nil {
			rt.Fatalf("put: %v", err)
		}
		if put.Version != 1 {
			rt.Fatalf("first put: version %d, want 1", put.Version)
		}
		if _, err := st.Put(ctx, domain, first); err == nil { // stale version 0 again
			rt.Fatalf("a second put at version 0 was not a conflict")
		}
		second = a18Successor(first, second)
		second.Version = put.Version
		put2, err := st.Put(ctx, domain, second)
		if err != nil {
			rt.Fatalf("put over the AppendJSON record: %v", err)
		}
		got, err := st.Load(ctx, domain)
		if err != nil {
			rt.Fatalf("load: %v", err)
		}
		exp := a18Norm(put2)
		if !reflect.DeepEqual(a18Norm(got), exp) {
			rt.Fatalf("record changed through the store:\n put %+v\nload %+v", exp, a18Norm(got))
		}
		enc, _ := json.Marshal(put2)
		if !bytes.Equal(put2.AppendJSON(nil), enc) {
			rt.Fatalf("AppendJSON is not json.Marshal:\n%s\n%s", put2.AppendJSON(nil), enc)
		}
		want[domain] = exp
	})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seen := 0
	if err := st.Scan(ctx, func(domain string, rec lease.Record) bool {
		seen++
		if w, ok := want[domain]; !ok || !reflect.DeepEqual(a18Norm(rec), w) {
			t.Errorf("after reopen %s:\n got %+v\nwant %+v", domain, a18Norm(rec), w)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if seen != len(want) {
		t.Fatalf("scan saw %d records, wrote %d", seen, len(want))
	}
}

func a18Strings(r lease.Record) []string {
	var s []string
	if l := r.Lease; l != nil {
		s = append(s, l.Token, l.Holder, l.RequestID)
	}
	for _, q := range r.Requests {
		s = append(s, q.ID, q.Holder)
	}
	return s
}

// a18Norm makes an empty request list nil (omitempty writes neither).
func a18Norm(r lease.Record) lease.Record {
	if len(r.Requests) == 0 {
		r.Requests = nil
	}
	return r
}

// A busy domain — a full list of remembered requests, every grant
// rewriting it — across controller restarts on one bbolt file: every
// grant is strictly newer than every earlier one (I1), a retried request
// id gets the same token back after a restart, and acquires whose holder
// or request id carries odd bytes (what a hand-made MQTT or HTTP payload
// can hold once decoded) are bad_request and leave the stored record
// byte for byte as it was.
func TestAttack18ControllerRestartsBusyDomain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	signer, keys := leasetest.MustSigner(t)
	ctx := context.Background()
	const domain = "press-1"
	odd := []string{"a\u2028b", "a\u2029", "<x>", "a&b", "a\x00b", "\x00", "a\xffb", "\xc0\xae", `a"b`, `a\b`, "a b",
		"a/b", "a+b", "é", "\ufffd", strings.Repeat("x", 129), "a\nb", "a\x7f"}
	var last fence.Token
	var lastReq protocol.Request
	rid := 0
	for restart := range 4 {
		st, err := boltstore.Open(path, boltstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		clock := leasetest.NewClock()
		clock.Advance(time.Duration(restart) * time.Minute)
		c, err := lease.New(ctx, lease.Config{Store: st, Signer: signer, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		env := leasetest.Env{Client: leasetest.Direct{C: c}, Clock: clock, Keys: keys}
		if restart > 0 {
			// The live lease of before the restart: its request id is
			// remembered and answered with the same token.
			r := c.Do(ctx, protocol.OpAcquire, domain, lastReq)
			if r.Code != protocol.CodeGranted || r.Token != last.Raw {
				t.Fatalf("restart %d: retry of %q: %+v, want the token %v", restart, lastReq.RequestID, r, last)
			}
			leasetest.Want(t, c.Do(ctx, protocol.OpRelease, domain, protocol.Request{Token: last.Raw}), protocol.CodeReleased)
		}
		for i := range 100 {
			rid++
			req := protocol.Request{RequestID: fmt.Sprintf("req-%d", rid), Holder: fmt.Sprintf("h%d", i%7), TTLms: 10_000}
			tok := leasetest.Verified(t, env, c.Do(ctx, protocol.OpAcquire, domain, req))
			if !last.IsZero() {
				leasetest.Newer(t, last, tok)
			}
			last, lastReq = tok, req
			if i == 99 {
				break // keep the last lease live across the restart
			}
			leasetest.Want(t, c.Do(ctx, protocol.OpRelease, domain, protocol.Request{Token: tok.Raw}), protocol.CodeReleased)
		}
		before, err := st.Load(ctx, domain)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(lease.MaxRequests, 100*(restart+1)); len(before.Requests) != want && restart < 2 {
			t.Fatalf("restart %d: %d remembered requests, want %d", restart, len(before.Requests), want)
		}
		for _, o := range odd {
			for _, req := range []protocol.Request{
				{RequestID: o, Holder: "h1", TTLms: 10_000},
				{RequestID: "ok-" + fmt.Sprint(rid), Holder: o, TTLms: 10_000},
			} {
				r := c.Do(ctx, protocol.OpAcquire, domain, req)
				if r.Code != protocol.CodeBadRequest || r.OK || r.Token != "" {
					t.Fatalf("acquire with request id %q holder %q: %+v, want bad_request", req.RequestID, req.Holder, r)
				}
			}
		}
		after, err := st.Load(ctx, domain)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before.AppendJSON(nil), after.AppendJSON(nil)) {
			t.Fatalf("refused acquires changed the record:\n%s\n%s", before.AppendJSON(nil), after.AppendJSON(nil))
		}
		if after.Seq != last.Seq || after.Lease == nil || after.Lease.Token != last.Raw {
			t.Fatalf("stored record seq %d lease %+v, want seq %d and the last token", after.Seq, after.Lease, last.Seq)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
