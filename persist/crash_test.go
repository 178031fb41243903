package persist

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var crashIterations = flag.Int("crash.iterations", 0, "SIGKILL iterations of TestCrashLoop (default 200, 1000 without -short... see test)")

const (
	crashChildEnv = "FENCEGATE_PERSIST_CRASH_CHILD"
	crashDevices  = 4
	crashIDPool   = 3000 // command ids per device; ids are reused, so retries happen
)

// crashOptions keep every record: the parent checks all acknowledgements.
var crashOptions = Options{MaxRecords: 1 << 30, MaxAge: 1 << 62}

// TestCrashLoop runs a child process (this test binary) that issues store
// operations and prints each acknowledgement after the call returned, and
// SIGKILLs it at random moments. After every kill the parent reopens the
// file and checks that every acknowledgement is reflected: acknowledged
// commands are journaled, acknowledged results are there, each device's
// fence is at least every acknowledged token, and no command id was ever
// accepted fresh twice (a retry of a known id must be a duplicate).
func TestCrashLoop(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	iterations := *crashIterations
	if iterations == 0 {
		iterations = 200
		if !testing.Short() {
			iterations = 300
		}
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	m := newCrashModel()
	for i := range iterations {
		acks := runCrashChild(t, path, time.Duration(rand.IntN(40))*time.Millisecond)
		for _, a := range acks {
			if err := m.ack(a); err != nil {
				t.Fatalf("iteration %d: %v", i, err)
			}
		}
		if err := m.check(path); err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
	}
	t.Logf("%d kills, %d accepted, %d completed, %d duplicates, %d stale, %d raised",
		iterations, len(m.accepted), len(m.completed), m.duplicates, m.stale, m.raises)
	if len(m.completed) == 0 || m.duplicates == 0 || m.stale == 0 {
		t.Fatal("the crash loop did not exercise completions, duplicates and stale tokens")
	}
}

// runCrashChild starts the child, lets it work for about d after it is
// ready, SIGKILLs it and returns the acknowledgement lines it printed.
func runCrashChild(t *testing.T, path string, d time.Duration) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashLoop$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan []string, 1)
	ready := make(chan struct{})
	go func() { lines <- readAcks(out, ready) }()
	select {
	case <-ready:
		time.Sleep(d)
	case <-time.After(30 * time.Second):
		t.Error("child not ready after 30 s")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	acks := <-lines
	_ = cmd.Wait()
	return acks
}

// readAcks returns the complete lines of r until EOF; a line cut by the kill
// (no newline) is dropped, since it was never fully acknowledged.
func readAcks(r io.Reader, ready chan<- struct{}) []string {
	br := bufio.NewReader(r)
	var acks []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return acks
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "READY" {
			close(ready)
			continue
		}
		acks = append(acks, line)
	}
}

// crashChild is the child process: workers per device issue Accept,
// Complete and Raise in a loop and print one line per returned call.
func crashChild(path string) {
	s, err := Open(path, crashOptions)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	fences, err := s.DomainFences()
	if err != nil {
		fmt.Fprintln(os.Stderr, "child fences:", err)
		os.Exit(2)
	}
	var outMu sync.Mutex
	ack := func(format string, args ...any) {
		outMu.Lock()
		fmt.Fprintf(os.Stdout, format+"\n", args...) // one write(2): atomic in the pipe
		outMu.Unlock()
	}
	ack("READY")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for d := range crashDevices {
		dev := fmt.Sprintf("dev%d", d)
		wg.Go(func() { crashWorker(ctx, s, dev, fences[crashDomain(dev)].Token.Seq, ack) })
	}
	wg.Wait()
	os.Exit(0) // only reached if the parent never killed us
}

func crashWorker(ctx context.Context, s *Store, dev string, high uint64, ack func(string, ...any)) {
	sg := testSigner(nopTB{})
	var last Command // the last command accepted, retried now and then
	for ctx.Err() == nil {
		seq := max(1, int64(high)+int64(rand.IntN(7))-3)
		tok := mustToken(nopTB{}, sg, crashDomain(dev), 1, uint64(seq), "h"+strconv.FormatInt(seq, 10))
		if rand.IntN(10) == 0 {
			d, err := s.Raise(ctx, tok)
			if err != nil {
				return
			}
			ack("raise %s %d %s", dev, seq, d.Outcome)
			high = max(high, d.Fence.Seq)
			continue
		}
		id := "c" + strconv.Itoa(rand.IntN(crashIDPool))
		if last.ID != "" && rand.IntN(5) == 0 {
			id, tok, seq = last.ID, last.Token, int64(last.Token.Seq) // a retry: same id, same command
		}
		d, err := s.Accept(ctx, Command{Device: dev, ID: id, Token: tok})
		if err != nil {
			return
		}
		if d.Outcome == Accepted {
			last = Command{ID: id, Token: tok}
		}
		ack("accept %s %s %d %s", dev, id, seq, d.Outcome)
		high = max(high, d.Fence.Seq)
		if d.Outcome == Accepted && rand.IntN(4) != 0 {
			if err := s.Complete(ctx, dev, id, []byte("r-"+id)); err != nil {
				return
			}
			ack("complete %s %s", dev, id)
		}
	}
}

// crashDomain gives each crash-loop device a fencing domain of its own, so
// the parent can check each device's fence on its own.
func crashDomain(dev string) string { return "plant-" + dev }

// nopTB lets the child reuse the token helpers outside a test.
type nopTB struct{ testing.TB }

func (nopTB) Helper()                   {}
func (nopTB) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (nopTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

// crashModel is what the parent knows from acknowledgements.
type crashModel struct {
	accepted   map[string]bool   // "dev/id" acknowledged accepted fresh
	completed  map[string]bool   // "dev/id" acknowledged completed
	highest    map[string]uint64 // per device, highest acknowledged fence
	duplicates int
	stale      int
	reused     int // a known id retried with another token: refused
	raises     int
}

func newCrashModel() *crashModel {
	return &crashModel{accepted: map[string]bool{}, completed: map[string]bool{}, highest: map[string]uint64{}}
}

func (m *crashModel) ack(line string) error {
	f := strings.Fields(line)
	switch {
	case len(f) == 5 && f[0] == "accept":
		return m.ackAccept(f[1], f[2], f[3], f[4])
	case len(f) == 3 && f[0] == "complete":
		m.completed[f[1]+"/"+f[2]] = true
		return nil
	case len(f) == 4 && f[0] == "raise":
		m.raises++
		if f[3] == Accepted.String() {
			m.raiseTo(f[1], f[2])
		}
		return nil
	}
	return fmt.Errorf("unparsable acknowledgement %q", line)
}

func (m *crashModel) ackAccept(dev, id, seq, outcome string) error {
	key := dev + "/" + id
	switch outcome {
	case Accepted.String():
		if m.accepted[key] {
			return fmt.Errorf("%s accepted fresh twice", key)
		}
		m.accepted[key] = true
		m.raiseTo(dev, seq)
	case Duplicate.String():
		m.duplicates++
	case Stale.String():
		m.stale++
	case IDReused.String():
		m.reused++
	default:
		return fmt.Errorf("%s: unexpected outcome %s", key, outcome)
	}
	return nil
}

func (m *crashModel) raiseTo(dev, seq string) {
	n, _ := strconv.ParseUint(seq, 10, 64)
	m.highest[dev] = max(m.highest[dev], n)
}

// check reopens the store and compares it with the acknowledgements.
func (m *crashModel) check(path string) error {
	s, err := Open(path, crashOptions)
	if err != nil {
		return err
	}
	defer s.Close()
	fences, err := s.DomainFences()
	if err != nil {
		return err
	}
	for dev, high := range m.highest {
		if got := fences[crashDomain(dev)].Token.Seq; got < high {
			return fmt.Errorf("%s fence %d below acknowledged %d", dev, got, high)
		}
	}
	for key := range m.accepted {
		dev, id, _ := strings.Cut(key, "/")
		r, ok, err := s.Lookup(dev, id)
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("acknowledged %s missing from journal", key)
		case m.completed[key] && (r.State != StateDone || string(r.Result) != "r-"+id):
			return fmt.Errorf("acknowledged result of %s: state %s result %q", key, r.State, r.Result)
		case r.State == StateAccepted:
			return fmt.Errorf("%s still accepted after reopen, want in_doubt or done", key)
		}
	}
	return nil
}
