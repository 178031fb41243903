package persist

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkLoneCommandPages is one device's command cycle — Accept, then
// Complete, each its own fsynced commit, as for a lone command — on a
// journal that already holds 2,000 commands. Besides the time per cycle it
// reports what each of the two commits writes and takes:
//
//	pages/accept, pages/complete  pages bbolt writes (meta page included)
//	ms/accept, ms/complete        commit latency, fsyncs included
//
// A bbolt commit is two fdatasyncs plus one pwrite per dirty page, so the
// pages a command dirties are what the lone command's latency grows with.
func BenchmarkLoneCommandPages(b *testing.B) {
	s := mustOpen(b, Options{})
	tok := mustToken(b, testSigner(b), "plant", 1, 1, "a")
	result := []byte(`{"id":"c","device":"d1","status":"applied","code":"ok","duplicate":false,"at":"2026-12-02T05:00:00.000Z","output":{"value":5}}`)
	cycle := func(i int) (acceptPages, completePages int64, accept, complete time.Duration) {
		id := fmt.Sprintf("cmd-%08d", i)
		w0, t0 := pagesWritten(s), time.Now()
		mustAccept(b, s, Command{Device: "d1", ID: id, Token: tok, Op: "set", Args: []byte(`{"value":5}`)})
		w1, t1 := pagesWritten(s), time.Now()
		if err := s.Complete(ctxT(b), "d1", id, result); err != nil {
			b.Fatal(err)
		}
		return w1 - w0, pagesWritten(s) - w1, t1.Sub(t0), time.Since(t1)
	}
	for i := range 2000 {
		cycle(i)
	}
	var ap, cp int64
	var at, ct time.Duration
	b.ResetTimer()
	for i := range b.N {
		a, c, ad, cd := cycle(2000 + i)
		ap, cp, at, ct = ap+a, cp+c, at+ad, ct+cd
	}
	n := float64(b.N)
	b.ReportMetric(float64(ap)/n, "pages/accept")
	b.ReportMetric(float64(cp)/n, "pages/complete")
	b.ReportMetric(at.Seconds()*1000/n, "ms/accept")
	b.ReportMetric(ct.Seconds()*1000/n, "ms/complete")
}

// pagesWritten is the number of pages the store's transactions have
// written so far.
func pagesWritten(s *Store) int64 {
	st := s.db.Stats()
	return st.TxStats.GetWrite()
}
