package chaos

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/internal/lossyfs"
	"github.com/fencegate/fencegate/protocol"
)

var (
	powerLossCuts = flag.Int("powerloss.cuts", 10, "power cuts of TestPowerLossRealAgent (a long campaign: 500)")
	powerLossSeed = flag.Uint64("powerloss.seed", 20240601, "seed of TestPowerLossRealAgent")
	powerLossOut  = flag.String("powerloss.out", "", "where TestPowerLossRealAgent keeps a failing campaign's files (default: the test's temporary directory)")
)

var powerLossLast = regexp.MustCompile(`(?m)^(\d+) cuts, (\d+) violations\n?$`)

// skipWithoutPowerLoss skips a campaign test where it cannot run.
func skipWithoutPowerLoss(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs power-cut campaigns of real processes; not in -short")
	}
	if err := lossyfs.Available(); err != nil {
		t.Skipf("%v: the power-loss campaign serves a FUSE mount (CI runs as root with /dev/fuse)", err)
	}
}

// noMountUnder fails the test if a FUSE mount is left under dir.
func noMountUnder(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir) {
			t.Errorf("a mount outlived the campaign: %s", line)
		}
	}
}

// The real agent survives every cut: no violation, and the campaign really
// exercised the three rules (answers re-sent, stale probes refused, applies
// read from the logs on the mount).
func TestPowerLossRealAgent(t *testing.T) {
	skipWithoutPowerLoss(t)
	dir := t.TempDir()
	bin := buildFencechaos(t, dir)
	outDir := filepath.Join(dir, "out")
	if *powerLossOut != "" {
		outDir = *powerLossOut
	}
	var out bytes.Buffer
	o := PowerLossOptions{Cuts: *powerLossCuts, Seed: *powerLossSeed, Out: outDir, Self: bin}
	sum, err := runPowerLoss(context.Background(), o, &out)
	t.Logf("output:\n%s", out.String())
	noMountUnder(t, dir)
	if err != nil {
		t.Fatalf("harness error: %v", err)
	}
	if sum.Total() != 0 {
		t.Fatalf("%d violations of the real agent", sum.Total())
	}
	if m := powerLossLast.FindStringSubmatch(out.String()); m == nil || m[1] != strconv.Itoa(o.Cuts) || m[2] != "0" {
		t.Fatalf("last line %q, want \"%d cuts, 0 violations\"", m, o.Cuts)
	}
	switch {
	case sum.Cuts != o.Cuts:
		t.Fatalf("%d cuts run, want %d", sum.Cuts, o.Cuts)
	case sum.Codes[protocol.CodeOK] == 0 || sum.Resent == 0:
		t.Fatalf("no applied command was re-sent after a cut (%d ok, %d re-sent): rule 1 was not exercised", sum.Codes[protocol.CodeOK], sum.Resent)
	case sum.ProbesStale == 0:
		t.Fatalf("no stale-token probe was answered stale_token (%d probes): rule 2 was not exercised", sum.Probes)
	case sum.Applies == 0:
		t.Fatal("no apply read from the devices' logs on the mount: rule 3 was not exercised")
	}
	if _, err := os.Stat(sum.Dir); !os.IsNotExist(err) {
		t.Errorf("the files of a passing campaign were kept (%s): %v", sum.Dir, err)
	}
}

// The mutation check: an agent whose fence store never fsyncs
// (persist.MutantNoSync) must make the campaign report a violation within
// a few cuts, exit 1, and print the seed and the replay command.
func TestPowerLossCatchesAgentWithoutFsync(t *testing.T) {
	skipWithoutPowerLoss(t)
	dir := t.TempDir()
	bin := buildFencechaos(t, dir, "fencegate_mutant_nosync")
	var out bytes.Buffer
	o := PowerLossOptions{Cuts: 5, Seed: 7, Out: filepath.Join(dir, "out"), Self: bin}
	code := RunPowerLoss(context.Background(), o, &out)
	t.Logf("output:\n%s", out.String())
	noMountUnder(t, dir)
	if code != ExitViolation {
		t.Fatalf("exit %d, want %d (violation) for an agent that never fsyncs its store", code, ExitViolation)
	}
	m := powerLossLast.FindStringSubmatch(out.String())
	if m == nil || m[2] == "0" {
		t.Fatalf("last line %q, want \"N cuts, V violations\" with V > 0", m)
	}
	for _, want := range []string{"VIOLATION", "seed 7", "replay: fencechaos --power-loss --cuts 5 --seed 7 --out "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	kept, err := filepath.Glob(filepath.Join(o.Out, "powerloss-7", "cut*-state"))
	if err != nil || len(kept) == 0 {
		t.Errorf("the state a violating cut left was not kept (%v, %v)", kept, err)
	}
}

// Rule 1's judge: a journaled answer must come back the same and marked
// duplicate (or in_doubt); anything else is a violation.
func TestPowerLossJudgeResend(t *testing.T) {
	set := &plAck{ID: "s-1", Op: "set", Device: "sim1"}
	get := &plAck{ID: "g-1", Op: "get", Device: "sim1", Idempotent: true}
	res := func(c protocol.Code, dup bool) protocol.Result { return protocol.Result{Code: c, Duplicate: dup} }
	cases := []struct {
		name   string
		a      *plAck
		expect protocol.Code
		res    protocol.Result
		bad    bool
	}{
		{"ok replayed", set, protocol.CodeOK, res(protocol.CodeOK, true), false},
		{"ok applied afresh", set, protocol.CodeOK, res(protocol.CodeOK, false), true},
		{"ok now in doubt: the published result was lost", set, protocol.CodeOK, res(protocol.CodeInDoubt, true), true},
		{"in doubt, not from the journal", set, protocol.CodeInDoubt, res(protocol.CodeInDoubt, false), true},
		{"ok now stale, not a duplicate", set, protocol.CodeOK, res(protocol.CodeStaleToken, false), true},
		{"device error replayed", set, protocol.CodeDeviceError, res(protocol.CodeDeviceError, true), false},
		{"device error redone", set, protocol.CodeDeviceError, res(protocol.CodeDeviceError, false), true},
		{"in doubt stays", set, protocol.CodeInDoubt, res(protocol.CodeInDoubt, true), false},
		{"in doubt applied", set, protocol.CodeInDoubt, res(protocol.CodeOK, false), true},
		{"idempotent in doubt applied", get, protocol.CodeInDoubt, res(protocol.CodeOK, false), false},
		{"stale stays stale", set, protocol.CodeStaleToken, res(protocol.CodeStaleToken, false), false},
		{"stale applied", set, protocol.CodeStaleToken, res(protocol.CodeOK, false), true},
		{"stale in doubt", set, protocol.CodeStaleToken, res(protocol.CodeInDoubt, true), true},
		{"expired, applied now", set, protocol.CodeExpired, res(protocol.CodeOK, false), false},
		{"expired, journaled expired", set, protocol.CodeExpired, res(protocol.CodeExpired, true), false},
		{"expired, but had been applied", set, protocol.CodeExpired, res(protocol.CodeOK, true), true},
		{"expired, but had been in flight", set, protocol.CodeExpired, res(protocol.CodeInDoubt, true), true},
		{"no answer", set, protocol.CodeOK, res("", false), false},
		{"busy", set, protocol.CodeOK, res(protocol.CodeBusy, false), false},
		{"never answered, applied now", set, "", res(protocol.CodeOK, false), false},
		{"never answered, journaled", set, "", res(protocol.CodeOK, true), false},
		{"never answered, in doubt from the journal", set, "", res(protocol.CodeInDoubt, true), false},
		{"never answered, in doubt not from the journal", set, "", res(protocol.CodeInDoubt, false), true},
		{"never answered, stale", set, "", res(protocol.CodeStaleToken, false), false},
	}
	for _, c := range cases {
		if got := judgeResend(c.a, resendExpect{code: c.expect}, c.res); (got != "") != c.bad {
			t.Errorf("%s: verdict %q, want violation %v", c.name, got, c.bad)
		}
	}
}

// Rule 2 as the ledger sees it: an answer that entered the driver with a
// token below one acknowledged before it was sent is a violation; one sent
// before that acknowledgement is not, nor is a stale_token answer.
func TestPowerLossLedgerFence(t *testing.T) {
	var hist bytes.Buffer
	led := newLedger(&hist)
	send := func(id string, seq uint64, sent time.Time, code protocol.Code) {
		led.answer(&plAck{ID: id, Device: "sim1", Domain: "d1", Op: "set", Epoch: 1, Seq: seq, Sent: sent}, protocol.Result{Code: code})
	}
	early := time.Now()
	send("high", 5, early, protocol.CodeOK)
	send("old-in-flight", 4, early, protocol.CodeOK) // sent before "high" was acknowledged: no verdict
	send("refused", 4, time.Now(), protocol.CodeStaleToken)
	if vs := led.violationsFrom(0); len(vs) != 0 {
		t.Fatalf("violations %v, want none", vs)
	}
	send("stale-applied", 4, time.Now(), protocol.CodeOK)
	vs := led.violationsFrom(0)
	if len(vs) != 1 || vs[0].Rule != RuleFence || !strings.Contains(vs[0].Msg, "stale-applied") {
		t.Fatalf("violations %v, want one of %s for stale-applied", vs, RuleFence)
	}
	if tok, ok := led.below("d1", [2]uint64{1, 5}); ok {
		t.Fatalf("below found %v with no lease token recorded", tok)
	}
	sc := bufio.NewScanner(&hist)
	lines := 0
	for sc.Scan() {
		lines++
	}
	if lines != 5 { // four answers and the violation
		t.Errorf("history has %d lines, want 5", lines)
	}
}

// Rule 3: the union of the log copies sees an id applied twice even when
// each copy holds it once (the cut lost the first line); the same line
// read again, or an idempotent op applied again after a restart (it was in
// doubt), is no violation.
func TestPowerLossApplyLogUnion(t *testing.T) {
	led := newLedger(&bytes.Buffer{})
	al := newApplyLogs([]string{"sim1"}, t.TempDir())
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	e := func(id string, at time.Duration, idem bool) sim.Entry {
		return sim.Entry{Device: "sim1", ID: id, Op: "set", Idempotent: idem, Domain: "d1", Epoch: 1, Seq: 1, Holder: "sup1", At: t0.Add(at)}
	}
	al.check("sim1", []sim.Entry{e("a", 1, false), e("g", 2, true)}, "copy 1", led)
	led.nextRoundAt(t0.Add(3)) // a cut, then the restart: g in doubt
	al.check("sim1", []sim.Entry{e("a", 1, false), e("g", 2, true), e("g", 3, true)}, "copy 2", led)
	if vs := led.violationsFrom(0); len(vs) != 0 {
		t.Fatalf("violations %v, want none", vs)
	}
	al.check("sim1", []sim.Entry{e("a", 9, false)}, "copy 3", led)
	vs := led.violationsFrom(0)
	if len(vs) != 1 || vs[0].Rule != RuleApplyLog || !strings.Contains(vs[0].Msg, "command a ") {
		t.Fatalf("violations %v, want one of %s for command a", vs, RuleApplyLog)
	}
	if al.entries() != 2 {
		t.Errorf("%d distinct non-idempotent applies, want 2", al.entries())
	}
}

// A torn write joined to the next line loses only itself, and is counted
// once however often the log is read.
func TestPowerLossApplyLogTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	whole := `{"device":"sim1","id":"b","op":"set","domain":"d1","epoch":1,"seq":1,"holder":"h","started":"2025-01-01T00:00:00Z","at":"2025-01-01T00:00:01Z"}`
	data := `{"device":"sim1","id":"a","op":"se` + whole + "\n" + whole + "\n" + `{"device":"si`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	al := newApplyLogs(nil, t.TempDir())
	entries, err := al.read("sim1", path)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].ID != "b" || len(al.torn) != 1 {
		t.Fatalf("read %+v with %d torn lines, want two entries of b and one torn line", entries, len(al.torn))
	}
	if _, err := al.read("sim1", path); err != nil || len(al.torn) != 1 {
		t.Fatalf("read again: %v, %d torn lines; want the same torn line counted once", err, len(al.torn))
	}
}

// A fresh stale_token or expired answer to a re-send binds nothing new:
// the command is not kept among those every cut re-sends (they would grow
// with every stale command of a long campaign); a fresh result is.
func TestPowerLossLedgerRequeuesOnlyFreshResults(t *testing.T) {
	for _, c := range []struct {
		code    protocol.Code
		requeue bool
	}{{protocol.CodeStaleToken, false}, {protocol.CodeExpired, false}, {protocol.CodeOK, true}} {
		led := newLedger(&bytes.Buffer{})
		a := &plAck{ID: "u-1", Op: "set", Device: "sim1", Domain: "d1", Epoch: 1, Seq: 1, Sent: time.Now()}
		led.answer(a, protocol.Result{})
		led.nextRound()
		if due := led.due(time.Now(), 0, rand.New(rand.NewPCG(1, 2))); !contains(due, a) {
			t.Fatalf("%s: never-answered command not due after the cut", c.code)
		}
		judgeLikeResend(led, a, protocol.Result{Code: c.code})
		if got := contains(led.unchecked, a); got != c.requeue {
			t.Errorf("re-send answered %s afresh: kept due %v, want %v", c.code, got, c.requeue)
		}
		if a.Code != c.code {
			t.Errorf("re-send answered %s: the command's first code is %q, want it (the draw of older answers picks it up)", c.code, a.Code)
		}
	}
}
