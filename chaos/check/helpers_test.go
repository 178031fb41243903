package check

import (
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/devices/sim"
)

// base is the start of every hand-made schedule.
var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()

// ms is base plus n milliseconds, in Unix ns.
func ms(n int) int64 { return base + int64(n)*int64(time.Millisecond) }

// tm is ms as a time.Time, for apply entries.
func tm(n int) time.Time { return time.Unix(0, ms(n)) }

// acquire is an acquire by proc (holder = proc) for domain answered code
// with position epoch.seq, from start to end (ms; end < 0: no answer).
func acquire(proc, domain, code string, epoch, seq uint64, start, end int) history.Op {
	o := history.Op{Proc: proc, Kind: history.Acquire, Domain: domain, Holder: proc, Start: ms(start), Code: code}
	if code == "granted" {
		o.Epoch, o.Seq = epoch, seq
	}
	if end >= 0 {
		o.End = ms(end)
	} else {
		o.Code = ""
	}
	return o
}

// grant is an acquire answered granted.
func grant(proc, domain string, epoch, seq uint64, start, end int) history.Op {
	return acquire(proc, domain, "granted", epoch, seq, start, end)
}

// release is proc's release of its lease epoch.seq, answered code, with
// the lease valid until validUntil (ms).
func release(proc, domain, code string, epoch, seq uint64, start, end, validUntil int) history.Op {
	o := history.Op{Proc: proc, Kind: history.Release, Domain: domain, Holder: proc, Epoch: epoch, Seq: seq,
		Start: ms(start), Code: code, ValidUntil: ms(validUntil)}
	if end >= 0 {
		o.End = ms(end)
	} else {
		o.Code = ""
	}
	return o
}

// event is a Lost or Held op of proc's lease epoch.seq at t, valid until
// validUntil (ms).
func event(kind history.Kind, proc, domain string, epoch, seq uint64, t, validUntil int) history.Op {
	return history.Op{Proc: proc, Kind: kind, Domain: domain, Holder: proc, Epoch: epoch, Seq: seq,
		Start: ms(t), End: ms(t), ValidUntil: ms(validUntil)}
}

// command is proc's command id to device with lease epoch.seq of domain,
// answered code, from start to end (ms; end < 0: no answer).
func command(proc, device, id, domain string, epoch, seq uint64, code string, start, end int) history.Op {
	o := history.Op{Proc: proc, Kind: history.Command, Domain: domain, Holder: proc, Epoch: epoch, Seq: seq,
		Device: device, ID: id, Op: "set", Start: ms(start), Code: code}
	if end >= 0 {
		o.End = ms(end)
	} else {
		o.Code = ""
	}
	return o
}

// idem marks a command idempotent.
func idem(o history.Op) history.Op {
	o.Idempotent = true
	o.Op = "get"
	return o
}

// apply is an apply entry of id on device with lease epoch.seq of domain
// held by holder, started and applied at the given ms.
func apply(device, id, domain, holder string, epoch, seq uint64, started, at int) sim.Entry {
	return sim.Entry{Device: device, ID: id, Op: "set", Domain: domain, Epoch: epoch, Seq: seq, Holder: holder,
		Started: tm(started), At: tm(at)}
}

// idemEntry marks an entry idempotent.
func idemEntry(e sim.Entry) sim.Entry {
	e.Idempotent = true
	e.Op = "get"
	return e
}

// fault is a fault of kind on target from start to end (ms).
func fault(kind, target string, start, end int) history.Fault {
	return history.Fault{Kind: kind, Target: target, Start: ms(start), End: ms(end)}
}

// doubtKinds are the DoubtFaults of the tests.
var doubtKinds = []string{"kill-agent", "kill-plugin", "unplug", "stall", "reboot"}

// twoDevices maps fw1 and fw2 to d1.
var twoDevices = map[string]string{"fw1": "d1", "fw2": "d1"}

// wantClean fails t unless r has no violation and no note.
func wantClean(t *testing.T, r Report) {
	t.Helper()
	for _, v := range r.Violations {
		t.Errorf("unexpected violation %s", v)
	}
	for _, n := range r.Notes {
		t.Errorf("unexpected note %s", n)
	}
}

// wantViolation fails t unless r has a violation of invariant whose
// message contains every part; it returns that violation.
func wantViolation(t *testing.T, r Report, invariant string, parts ...string) Violation {
	t.Helper()
	for _, v := range r.Violations {
		if v.Invariant == invariant && containsAll(v.Message, parts) {
			return v
		}
	}
	t.Fatalf("no %s violation containing %q; got %v", invariant, parts, r.Violations)
	return Violation{}
}

// wantNoViolationWith fails t if r has a violation of invariant whose
// message contains every part.
func wantNoViolationWith(t *testing.T, r Report, invariant string, parts ...string) {
	t.Helper()
	for _, v := range r.Violations {
		if v.Invariant == invariant && containsAll(v.Message, parts) {
			t.Errorf("unexpected violation %s", v)
		}
	}
}

// containsAll reports whether s contains every part.
func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// count is how many violations of invariant r has.
func count(r Report, invariant string) int {
	n := 0
	for _, v := range r.Violations {
		if v.Invariant == invariant {
			n++
		}
	}
	return n
}
