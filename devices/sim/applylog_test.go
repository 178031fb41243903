package sim

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestReadLog(t *testing.T) {
	line := `{"device":"dev","id":"1","op":"set","domain":"d","epoch":1,"seq":1,"holder":"a","at":"2025-01-01T00:00:00Z"}` + "\n"
	tests := []struct {
		name    string
		content string
		want    int
		wantErr error
	}{
		{name: "empty", content: "", want: 0},
		{name: "whole lines", content: line + line, want: 2},
		{name: "partial last line", content: line + line + line[:20], want: 2},
		{name: "only a partial line", content: line[:len(line)-1], want: 0},
		{name: "bad middle line", content: line + "garbage\n" + line, wantErr: ErrBadLog},
		{name: "missing file", wantErr: fs.ErrNotExist},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "apply.log")
			if !errors.Is(tc.wantErr, fs.ErrNotExist) {
				if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ReadLog(path)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && len(got) != tc.want) {
				t.Fatalf("ReadLog = %d entries, %v; want %d, %v", len(got), err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestReadLogAfterDeviceAndTornWrite(t *testing.T) {
	d := mustNew(t, Config{})
	mustApply(t, d, cmd("1", "set", `{"value":1}`, tok(1, 1, "a")))
	f, err := os.OpenFile(d.cfg.Log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"device":"dev","id":"2","op":"se`) // a write cut short by SIGKILL
	f.Close()
	if got := logIDs(mustReadLog(t, d)); got != "1" {
		t.Fatalf("log ids = %q, want \"1\"", got)
	}
}

func TestCheckLog(t *testing.T) {
	e := func(device, id, domain string, epoch, seq uint64, idem bool) Entry {
		return Entry{Device: device, ID: id, Op: "op", Idempotent: idem, Domain: domain, Epoch: epoch, Seq: seq}
	}
	tests := []struct {
		name string
		log  []Entry
		want []error // each must be in the result; nil means no error
	}{
		{name: "empty"},
		{name: "advancing and equal", log: []Entry{e("x", "1", "d", 1, 1, false), e("x", "2", "d", 1, 1, false), e("x", "3", "d", 2, 1, false)}},
		{name: "seq backwards", log: []Entry{e("x", "1", "d", 1, 5, false), e("x", "2", "d", 1, 4, false)},
			want: []error{ErrTokenBackwards}},
		{name: "epoch backwards", log: []Entry{e("x", "1", "d", 2, 1, false), e("x", "2", "d", 1, 9, false)},
			want: []error{ErrTokenBackwards}},
		{name: "backwards after equal", log: []Entry{e("x", "1", "d", 1, 5, false), e("x", "2", "d", 1, 5, false), e("x", "3", "d", 1, 2, false)},
			want: []error{ErrTokenBackwards}},
		{name: "devices independent", log: []Entry{e("x", "1", "d", 1, 5, false), e("y", "1", "d", 1, 4, false)}},
		{name: "domains independent", log: []Entry{e("x", "1", "d", 1, 5, false), e("x", "2", "e", 1, 4, false)}},
		{name: "duplicate non-idempotent", log: []Entry{e("x", "1", "d", 1, 1, false), e("x", "1", "d", 1, 1, false)},
			want: []error{ErrDuplicateApply}},
		{name: "duplicate idempotent", log: []Entry{e("x", "1", "d", 1, 1, true), e("x", "1", "d", 1, 1, true)}},
		{name: "one violation per device", log: []Entry{
			e("x", "1", "d", 1, 5, false), e("x", "2", "d", 1, 4, false),
			e("y", "1", "d", 1, 1, false), e("y", "1", "d", 1, 2, false)},
			want: []error{ErrTokenBackwards, ErrDuplicateApply}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckLog(tc.log)
			if (err == nil) != (len(tc.want) == 0) {
				t.Fatalf("CheckLog = %v, want %v", err, tc.want)
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("CheckLog = %v, want it to wrap %v", err, w)
				}
			}
		})
	}
}

func TestSharedLogConcurrentAppenders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apply.log")
	const perDevice = 100
	var wg sync.WaitGroup
	for _, id := range []string{"dev-a", "dev-b", "dev-c"} {
		d, err := New(id, Config{Log: path}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		wg.Go(func() {
			for i := range perDevice {
				if _, err := d.Apply(context.Background(), cmd("c", "set", `{"value":"`+id+`"}`, tok(1, uint64(i+1), "a"))); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	entries, err := ReadLog(path)
	if err != nil || len(entries) != 3*perDevice {
		t.Fatalf("ReadLog = %d entries, %v; want %d", len(entries), err, 3*perDevice)
	}
	if err := CheckLog(entries); !errors.Is(err, ErrDuplicateApply) {
		t.Fatalf("CheckLog = %v, want duplicate ids reported (every command is id \"c\")", err)
	}
}
