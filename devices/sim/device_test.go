package sim

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
)

func TestOpsAndOutputs(t *testing.T) {
	t1 := tok(1, 1, "a")
	custom := Config{Ops: []OpConfig{{Name: "open", Idempotent: true}}}
	tests := []struct {
		name     string
		cfg      Config
		prep     []devices.Command // applied first, must succeed
		cmd      devices.Command
		wantOut  string // compared as JSON; "" means nil output
		wantCode devices.Code
		wantMsg  string // substring of the error
	}{
		{name: "set stores any JSON", cmd: cmd("1", "set", `{"value": {"a": [1, 2]}}`, t1), wantOut: `{"value":{"a":[1,2]}}`},
		{name: "set null", cmd: cmd("1", "set", `{"value": null}`, t1), wantOut: `{"value":null}`},
		{name: "get before set", cmd: cmd("1", "get", "", t1), wantOut: `{"value":null}`},
		{name: "get after set", prep: []devices.Command{cmd("1", "set", `{"value":42}`, t1)},
			cmd: cmd("2", "get", "", t1), wantOut: `{"value":42}`},
		{name: "get with null args", cmd: cmd("1", "get", "null", t1), wantOut: `{"value":null}`},
		{name: "get with empty object", cmd: cmd("1", "get", " {} ", t1), wantOut: `{"value":null}`},
		{name: "pulse", cmd: cmd("1", "pulse", `{"ms":3}`, t1), wantOut: `{"pulsed_ms":3}`},
		{name: "pulse zero", cmd: cmd("1", "pulse", `{"ms":0}`, t1), wantOut: `{"pulsed_ms":0}`},
		{name: "pulse negative", cmd: cmd("1", "pulse", `{"ms":-1}`, t1), wantCode: devices.CodeDeviceError, wantMsg: "non-negative integer ≤ 60000, got -1"},
		{name: "pulse fraction", cmd: cmd("1", "pulse", `{"ms":1.5}`, t1), wantCode: devices.CodeDeviceError, wantMsg: "got 1.5"},
		{name: "pulse too long", cmd: cmd("1", "pulse", `{"ms":60001}`, t1), wantCode: devices.CodeDeviceError, wantMsg: "≤ 60000"},
		{name: "pulse string", cmd: cmd("1", "pulse", `{"ms":"5"}`, t1), wantCode: devices.CodeDeviceError, wantMsg: `got "5"`},
		{name: "pulse without ms", cmd: cmd("1", "pulse", "", t1), wantCode: devices.CodeDeviceError, wantMsg: "got nothing"},
		{name: "set without value", cmd: cmd("1", "set", `{}`, t1), wantCode: devices.CodeDeviceError, wantMsg: "args.value is required"},
		{name: "unknown arg", cmd: cmd("1", "set", `{"value":1,"vlaue":2}`, t1), wantCode: devices.CodeDeviceError, wantMsg: `unknown arg "vlaue"`},
		{name: "args array", cmd: cmd("1", "get", `[1]`, t1), wantCode: devices.CodeDeviceError, wantMsg: "must be a JSON object"},
		{name: "args malformed", cmd: cmd("1", "set", `{"value":`, t1), wantCode: devices.CodeDeviceError, wantMsg: "must be a JSON object"},
		{name: "unknown op", cmd: cmd("1", "reboot", "", t1), wantCode: devices.CodeUnknownOp, wantMsg: `no op "reboot"`},
		{name: "no token", cmd: cmd("1", "get", "", fence.Token{}), wantCode: devices.CodeDeviceError, wantMsg: "no token"},
		{name: "custom op", cfg: custom, cmd: cmd("1", "open", `{"any":"thing"}`, t1)},
		{name: "custom ops replace defaults", cfg: custom, cmd: cmd("1", "set", `{"value":1}`, t1), wantCode: devices.CodeUnknownOp},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := mustNew(t, tc.cfg)
			for _, c := range tc.prep {
				mustApply(t, d, c)
			}
			out, err := d.Apply(context.Background(), tc.cmd)
			checkResult(t, out, err, tc.wantOut, tc.wantCode, tc.wantMsg)
			wantLines := len(tc.prep)
			if tc.wantCode == "" {
				wantLines++
			}
			if got := mustReadLog(t, d); len(got) != wantLines {
				t.Fatalf("log has %d entries, want %d: %+v", len(got), wantLines, got)
			}
		})
	}
}

// checkResult compares an Apply result with the wanted output or error.
func checkResult(t *testing.T, out json.RawMessage, err error, wantOut string, wantCode devices.Code, wantMsg string) {
	t.Helper()
	if wantCode != "" {
		if err == nil || devices.CodeOf(err) != wantCode || !strings.Contains(err.Error(), wantMsg) {
			t.Fatalf("err = %v, want code %s containing %q", err, wantCode, wantMsg)
		}
		return
	}
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if wantOut == "" && out != nil {
		t.Fatalf("out = %s, want nil", out)
	}
	if wantOut != "" && string(out) != wantOut {
		t.Fatalf("out = %s, want %s", out, wantOut)
	}
}

func TestLogEntryFields(t *testing.T) {
	d := mustNew(t, Config{})
	tk := fence.Token{Domain: "room-1", Epoch: 3, Seq: 9, Holder: "sup-a", TTLms: 1}
	mustApply(t, d, cmd("c-1", "set", ` {"value": [1, 2]} `, tk))
	mustApply(t, d, cmd("c-2", "get", "", tk))
	got := mustReadLog(t, d)
	if len(got) != 2 {
		t.Fatalf("log has %d entries, want 2", len(got))
	}
	e := got[0]
	if e.Device != "dev" || e.ID != "c-1" || e.Op != "set" || e.Idempotent || e.Domain != "room-1" ||
		e.Epoch != 3 || e.Seq != 9 || e.Holder != "sup-a" || string(e.Args) != `{"value":[1,2]}` || e.At.IsZero() {
		t.Fatalf("entry = %+v", e)
	}
	if !got[1].Idempotent || got[1].Args != nil {
		t.Fatalf("get entry = %+v, want idempotent without args", got[1])
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want map[string]devices.Op
	}{
		{name: "defaults", want: map[string]devices.Op{"set": {}, "get": {Idempotent: true}, "pulse": {}}},
		{name: "configured", cfg: Config{Ops: []OpConfig{{Name: "on", Idempotent: true}, {Name: "toggle"}}},
			want: map[string]devices.Op{"on": {Idempotent: true}, "toggle": {}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := mustNew(t, tc.cfg)
			caps := d.Describe()
			if !caps.ChecksTokens || len(caps.Ops) != len(tc.want) {
				t.Fatalf("caps = %+v, want ChecksTokens and ops %v", caps, tc.want)
			}
			for name, op := range tc.want {
				if got, ok := caps.Ops[name]; !ok || got != op {
					t.Errorf("op %q = %+v (present %v), want %+v", name, got, ok, op)
				}
			}
			clear(caps.Ops)
			if len(d.Describe().Ops) != len(tc.want) {
				t.Fatal("modifying Describe's map changed the device")
			}
		})
	}
}

func TestStaleTokenRejectedAndNotLogged(t *testing.T) {
	first := tok(2, 5, "a")
	tests := []struct {
		name      string
		next      fence.Token
		wantStale bool
	}{
		{name: "older seq", next: tok(2, 4, "b"), wantStale: true},
		{name: "older epoch, higher seq", next: tok(1, 99, "b"), wantStale: true},
		{name: "same lease", next: tok(2, 5, "a")},
		{name: "same position, other holder", next: tok(2, 5, "b"), wantStale: true},
		{name: "newer seq", next: tok(2, 6, "b")},
		{name: "newer epoch, lower seq", next: tok(3, 1, "b")},
		{name: "other domain", next: fence.Token{Domain: "e", Epoch: 1, Seq: 1, Holder: "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := mustNew(t, Config{})
			mustApply(t, d, cmd("1", "set", `{"value":"first"}`, first))
			_, err := d.Apply(context.Background(), cmd("2", "set", `{"value":"second"}`, tc.next))
			want, wantIDs := `{"value":"second"}`, "1 2 3"
			if tc.wantStale {
				checkStale(t, err, first.Fence())
				want, wantIDs = `{"value":"first"}`, "1 3"
			} else if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if got := mustApply(t, d, cmd("3", "get", "", tok(9, 9, "z"))); string(got) != want {
				t.Fatalf("get = %s, want %s", got, want)
			}
			if got := logIDs(mustReadLog(t, d)); got != wantIDs {
				t.Fatalf("log ids = %q, want %q", got, wantIDs)
			}
		})
	}
}

// logIDs returns the command ids of entries, space-separated.
func logIDs(entries []Entry) string {
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.ID
	}
	return strings.Join(ids, " ")
}

// checkStale asserts err is stale_token carrying fence f.
func checkStale(t *testing.T, err error, f fence.Fence) {
	t.Helper()
	var e *devices.Error
	if !errors.As(err, &e) || e.Code != devices.CodeStaleToken || e.Fence == nil || *e.Fence != f {
		t.Fatalf("err = %#v, want stale_token with fence %+v", err, f)
	}
}
func TestFenceFileSurvivesNewDevice(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{FenceFile: filepath.Join(dir, "fence.json"), Log: filepath.Join(dir, "apply.log")}
	d1, err := New("dev", cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, d1, cmd("1", "set", `{"value":1}`, tok(3, 7, "a")))
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}

	d2 := mustNew(t, cfg)
	if f, ok := d2.Fence("d"); !ok || f != tok(3, 7, "a").Fence() {
		t.Fatalf("reopened fence = %+v, %v; want 3.7/a", f, ok)
	}
	_, err = d2.Apply(context.Background(), cmd("2", "set", `{"value":2}`, tok(3, 6, "b")))
	checkStale(t, err, tok(3, 7, "a").Fence())
	mustApply(t, d2, cmd("3", "set", `{"value":3}`, tok(3, 8, "c")))
	if got := logIDs(mustReadLog(t, d2)); got != "1 3" {
		t.Fatalf("log ids = %q, want \"1 3\"", got)
	}
	names, _ := filepath.Glob(filepath.Join(dir, ".fence.json.tmp*"))
	if len(names) != 0 {
		t.Fatalf("temp files left behind: %v", names)
	}
}

func TestFenceFileCorruptFailsNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.json")
	if err := os.WriteFile(path, []byte(`{"d":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New("dev", Config{FenceFile: path}, nil); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("New with corrupt fence file: err = %v, want one naming %s", err, path)
	}
}

func TestFailureInjection(t *testing.T) {
	const (
		ok    = devices.Code("")
		fail  = devices.CodeDeviceError
		tmout = devices.CodeDeviceTimeout
		unav  = devices.CodeDeviceUnavailable
	)
	tests := []struct {
		name string
		cfg  Config
		want []devices.Code // per apply, in order
	}{
		{name: "none", want: []devices.Code{ok, ok, ok}},
		{name: "fail_every 3", cfg: Config{FailEvery: 3}, want: []devices.Code{ok, ok, fail, ok, ok, fail}},
		{name: "timeout_every 2", cfg: Config{TimeoutEvery: 2}, want: []devices.Code{ok, tmout, ok, tmout}},
		{name: "timeout wins", cfg: Config{FailEvery: 2, TimeoutEvery: 2}, want: []devices.Code{ok, tmout, ok, tmout}},
		{name: "both", cfg: Config{FailEvery: 2, TimeoutEvery: 3}, want: []devices.Code{ok, fail, tmout, fail, ok, tmout}},
		{name: "unavailable", cfg: Config{Unavailable: true, FailEvery: 1}, want: []devices.Code{unav, unav}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := mustNew(t, tc.cfg)
			applied := 0
			for i, want := range tc.want {
				// Generous: an apply that is not made to time out must finish first.
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				_, err := d.Apply(ctx, cmd("c", "pulse", `{"ms":0}`, tok(1, uint64(i+1), "a")))
				cancel()
				if (want == ok) != (err == nil) || err != nil && devices.CodeOf(err) != want {
					t.Fatalf("apply %d: err = %v, want code %q", i+1, err, want)
				}
				if err == nil {
					applied++
				}
			}
			if got := mustReadLog(t, d); len(got) != applied {
				t.Fatalf("log has %d entries, want %d", len(got), applied)
			}
		})
	}
}

func TestContextDoneIsTimeoutAndNotApplied(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		args    string
		timeout time.Duration // 0: already cancelled
	}{
		{name: "device latency", cfg: Config{Latency: time.Hour}, timeout: 20 * time.Millisecond},
		{name: "op latency", cfg: Config{Ops: []OpConfig{{Name: "pulse", Latency: time.Hour}}}, timeout: 20 * time.Millisecond},
		{name: "pulse hold", args: `{"ms":60000}`, timeout: 20 * time.Millisecond},
		{name: "already cancelled, no latency"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := mustNew(t, tc.cfg)
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			args := tc.args
			if args == "" {
				args = `{"ms":0}`
			}
			_, err := d.Apply(ctx, cmd("1", "pulse", args, tok(1, 9, "a")))
			if e := (*devices.Error)(nil); !errors.As(err, &e) || e.Code != devices.CodeDeviceTimeout {
				t.Fatalf("err = %v, want device_timeout", err)
			}
			if got := mustReadLog(t, d); len(got) != 0 {
				t.Fatalf("log = %+v, want empty", got)
			}
			if _, raised := d.Fence("d"); raised {
				t.Fatal("a timed-out apply raised the fence")
			}
		})
	}
}

func TestConcurrentDescribeCloseApply(t *testing.T) {
	d := mustNew(t, Config{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				_, err := d.Apply(context.Background(), cmd("c", "get", "", tok(1, uint64(g*100+i+1), "a")))
				if c := devices.CodeOf(err); err != nil && c != devices.CodeDeviceUnavailable && c != devices.CodeStaleToken {
					t.Errorf("Apply: %v", err)
				}
				_ = d.Describe()
			}
		})
	}
	wg.Go(func() { _ = d.Close() })
	wg.Wait()
	_, err := d.Apply(context.Background(), cmd("z", "get", "", tok(9, 9, "a")))
	if devices.CodeOf(err) != devices.CodeDeviceUnavailable {
		t.Fatalf("Apply after Close: err = %v, want device_unavailable", err)
	}
	if err := CheckLog(mustReadLog(t, d)); err != nil {
		t.Fatal(err)
	}
}

// A NoFence device trusts the agent: it applies a stale token, and logs it
// with its token and the time it took the command, so CheckLog sees it.
func TestNoFenceAppliesStaleTokenAndLogsIt(t *testing.T) {
	d := mustNew(t, Config{NoFence: true})
	mustApply(t, d, cmd("a", "set", `{"value":1}`, tok(1, 5, "new")))
	mustApply(t, d, cmd("b", "set", `{"value":2}`, tok(1, 4, "old")))
	entries := mustReadLog(t, d)
	if len(entries) != 2 || entries[1].ID != "b" || entries[1].Seq != 4 {
		t.Fatalf("log = %+v, want a then b at seq 4", entries)
	}
	for _, e := range entries {
		if e.Started.IsZero() || e.At.Before(e.Started) {
			t.Errorf("entry %s: started %v, at %v: want started set and not after at", e.ID, e.Started, e.At)
		}
	}
	if err := CheckLog(entries); !errors.Is(err, ErrTokenBackwards) {
		t.Fatalf("CheckLog = %v, want ErrTokenBackwards", err)
	}
}
