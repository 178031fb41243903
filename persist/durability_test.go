package persist

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestCommitPrecedesAcknowledgement proves Accept returns only after its
// batch was committed: the writer is held inside OnCommit (after the fsync,
// before callers are released) and Accept must still be waiting.
func TestCommitPrecedesAcknowledgement(t *testing.T) {
	entered := make(chan int, 1)
	release := make(chan struct{})
	s := mustOpen(t, Options{OnCommit: func(ops int, _ time.Duration) {
		entered <- ops
		<-release
	}})
	if s.db.NoSync {
		t.Fatal("bbolt NoSync is set: commits would not be fsynced")
	}
	tok := mustToken(t, testSigner(t), "plant", 1, 1, "A")
	done := make(chan error, 1)
	go func() {
		_, err := s.Accept(ctxT(t), Command{Device: "p", ID: "c", Token: tok})
		done <- err
	}()
	if ops := <-entered; ops != 1 {
		t.Fatalf("commit of %d ops, want 1", ops)
	}
	select {
	case err := <-done:
		t.Fatalf("Accept returned (%v) before its commit finished", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestStaleRejectionCostsNoCommit checks that a batch that writes nothing is
// rolled back instead of committed.
func TestStaleRejectionCostsNoCommit(t *testing.T) {
	var mu sync.Mutex
	commits := 0
	s := mustOpen(t, Options{OnCommit: func(int, time.Duration) { mu.Lock(); commits++; mu.Unlock() }})
	sg := testSigner(t)
	mustAccept(t, s, Command{Device: "p", ID: "c1", Token: mustToken(t, sg, "plant", 1, 5, "A")})
	d := mustAccept(t, s, Command{Device: "p", ID: "c2", Token: mustToken(t, sg, "plant", 1, 4, "A")})
	mu.Lock()
	defer mu.Unlock()
	if d.Outcome != Stale || commits != 1 {
		t.Fatalf("outcome %v after %d commits, want stale after 1", d.Outcome, commits)
	}
}

// TestConcurrentDevices drives many devices at once (run with -race) and
// checks every device ends at its highest token with every command journaled,
// and that the writer grouped operations into fewer commits.
func TestConcurrentDevices(t *testing.T) {
	const devices, perDevice = 50, 60
	var mu sync.Mutex
	commits, ops := 0, 0
	s := mustOpen(t, Options{OnCommit: func(n int, _ time.Duration) { mu.Lock(); commits++; ops += n; mu.Unlock() }})
	sg := testSigner(t)
	toks := make([][]Command, devices)
	for d := range toks {
		for i := range perDevice {
			dev := fmt.Sprintf("dev%d", d)
			toks[d] = append(toks[d], Command{Device: dev, ID: fmt.Sprintf("c%d", i),
				Token: mustToken(t, sg, "plant-"+dev, 1, uint64(i/3+1), "A")})
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, devices)
	for d := range devices {
		wg.Go(func() {
			for _, cmd := range toks[d] {
				dec, err := s.Accept(ctxT(t), cmd)
				if err == nil && dec.Outcome != Accepted {
					err = fmt.Errorf("%s/%s: %v", cmd.Device, cmd.ID, dec.Outcome)
				}
				if err == nil {
					err = s.Complete(ctxT(t), cmd.Device, cmd.ID, []byte(cmd.ID))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fences, err := s.Fences()
	if err != nil {
		t.Fatal(err)
	}
	for d := range devices {
		dev := fmt.Sprintf("dev%d", d)
		if got, want := fences[dev].Token.Seq, uint64((perDevice-1)/3+1); got != want {
			t.Errorf("%s fence %d, want %d", dev, got, want)
		}
		j, _ := s.Journal(dev)
		if len(j) != perDevice {
			t.Errorf("%s journal has %d records, want %d", dev, len(j), perDevice)
		}
	}
	t.Logf("%d operations in %d commits", ops, commits)
	if commits >= ops {
		t.Errorf("no grouping: %d commits for %d operations", commits, ops)
	}
}

func TestRetentionPrunesOldestDoneRecords(t *testing.T) {
	var uptime time.Duration
	s := mustOpen(t, Options{MaxRecords: 5, MaxAge: time.Hour, Uptime: func() time.Duration { return uptime }})
	sg := testSigner(t)
	tok := mustToken(t, sg, "plant", 1, 1, "A")
	mustAccept(t, s, Command{Device: "p", ID: "pending", Token: tok})
	for i := range 3 {
		id := fmt.Sprintf("c%d", i)
		mustAccept(t, s, Command{Device: "p", ID: id, Token: tok})
		if err := s.Complete(ctxT(t), "p", id, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A pending record at the front blocks pruning by count.
	for i := 3; i < 8; i++ {
		mustAccept(t, s, Command{Device: "p", ID: fmt.Sprintf("c%d", i), Token: tok})
	}
	if j, _ := s.Journal("p"); len(j) != 9 {
		t.Fatalf("journal %d records, want 9 while the oldest is pending", len(j))
	}
	if err := s.Complete(ctxT(t), "p", "pending", nil); err != nil {
		t.Fatal(err)
	}
	j, _ := s.Journal("p")
	if len(j) != 5 || j[0].ID != "c3" || j[4].ID != "c7" {
		t.Fatalf("journal after count pruning: %v", ids(j))
	}
	uptime += 2 * time.Hour // everything is old now; pending ones stay
	if err := s.Prune(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if j, _ := s.Journal("p"); len(j) != 5 {
		t.Fatalf("age pruning removed pending records: %v", ids(j))
	}
	for i := 3; i < 8; i++ {
		if err := s.Complete(ctxT(t), "p", fmt.Sprintf("c%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Prune(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if j, _ := s.Journal("p"); len(j) != 0 {
		t.Fatalf("age pruning left %v", ids(j))
	}
	if f, _ := s.Fences(); f["p"].Token.Seq != 1 {
		t.Fatal("pruning touched the fence")
	}
}

func ids(rs []Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID + ":" + string(r.State)
	}
	return out
}
