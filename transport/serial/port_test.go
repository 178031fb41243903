package serial

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// probeEnv makes the test binary, re-executed, try to open the node named
// by its value and exit with 0 (opened), 16 (EBUSY) or 1 (other error).
const probeEnv = "FENCEGATE_SERIAL_PROBE_OPEN"

func probeOpen(path string) int {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	switch {
	case err == nil:
		unix.Close(fd)
		return 0
	case errors.Is(err, unix.EBUSY):
		return 16
	}
	os.Stderr.WriteString(err.Error() + "\n")
	return 1
}

func TestConfigValidateNamesKey(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		key  string
	}{
		{"no path", Config{}, "path"},
		{"data bits", Config{Path: "/x", DataBits: 9}, "data_bits"},
		{"parity", Config{Path: "/x", Parity: "sometimes"}, "parity"},
		{"stop bits", Config{Path: "/x", StopBits: "3"}, "stop_bits"},
		{"baud", Config{Path: "/x", Baud: -1}, "baud"},
		{"read timeout", Config{Path: "/x", ReadTimeout: -1}, "read_timeout"},
		{"reopen max below min", Config{Path: "/x", ReopenMin: time.Second, ReopenMax: time.Millisecond}, "reopen_max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ce *ConfigError
			if err := tt.cfg.Validate(); !errors.As(err, &ce) || ce.Key != tt.key {
				t.Fatalf("Validate() = %v, want a ConfigError for %q", err, tt.key)
			}
		})
	}
	if err := (Config{Path: "/x", Parity: "even", StopBits: "1.5", DataBits: 7}).Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
}

func TestSecondOpenerIsRefused(t *testing.T) {
	_, path := newPTY(t)
	p, err := OpenPort(testConfig(path))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPort(testConfig(path)); !errors.Is(err, ErrHeld) {
		t.Fatalf("second OpenPort = %v, want ErrHeld", err)
	}
	if _, err := Dial(testConfig(path), NewLineDecoder(64), nil); !errors.Is(err, ErrHeld) {
		t.Fatalf("Dial of a held port = %v, want ErrHeld", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	p2, err := OpenPort(testConfig(path))
	if err != nil {
		t.Fatalf("open after Close: %v", err)
	}
	p2.Close()
}

// TestExclusiveModeRefusesOtherUsers checks TIOCEXCL itself: a process
// without CAP_SYS_ADMIN (here: user nobody) cannot open the node while the
// port is held, even if the node's mode lets it, and can once it is closed.
func TestExclusiveModeRefusesOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a probe process as user nobody")
	}
	_, path := newPTY(t)
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	p, err := OpenPort(testConfig(path))
	if err != nil {
		t.Fatal(err)
	}
	if code := probeAsNobody(t, path); code != 16 {
		t.Fatalf("probe open as nobody while held exited %d, want 16 (EBUSY)", code)
	}
	p.Close()
	if code := probeAsNobody(t, path); code != 0 {
		t.Fatalf("probe open as nobody after Close exited %d, want 0", code)
	}
}

func probeAsNobody(t *testing.T, path string) int {
	t.Helper()
	cmd := exec.Command(copyForNobody(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), probeEnv+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if ee.ExitCode() == 1 {
			t.Logf("probe: %s", out)
		}
		return ee.ExitCode()
	case err != nil:
		t.Skipf("cannot run probe as user nobody: %v", err)
	}
	return 0
}

// copyForNobody copies the test binary where user nobody can run it.
func copyForNobody(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	exe, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "probe")
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := dir; strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			os.Chmod(d, fi.Mode().Perm()|0o005)
		}
	}
	return bin
}

func TestWriteHonoursDeadline(t *testing.T) {
	_, path := newPTY(t) // nobody reads the master: the buffer fills
	l := mustDial(t, testConfig(path), NewLineDecoder(64))
	n, err := l.Send(ctxTimeout(t, 200*time.Millisecond), make([]byte, 4<<20))
	if !errors.Is(err, ErrWriteTimeout) {
		t.Fatalf("Send to a full port = %v, want ErrWriteTimeout", err)
	}
	if n <= 0 || n >= 4<<20 {
		t.Fatalf("Send reported %d bytes taken, want the part the kernel took", n)
	}
	if ok, _ := l.Available(); !ok {
		t.Fatal("a write timeout must not mark the port lost")
	}
}

// TestWriteTimeoutDropsUnsentRest: of a write that timed out on a
// stalled line, the part still queued in the kernel is discarded, so the
// device receives less than the kernel had taken.
func TestWriteTimeoutDropsUnsentRest(t *testing.T) {
	master, path := newPTY(t)
	l := mustDial(t, testConfig(path), NewLineDecoder(64))
	n, err := l.Send(ctxTimeout(t, 200*time.Millisecond), make([]byte, 4<<20))
	if !errors.Is(err, ErrWriteTimeout) {
		t.Fatalf("Send = %v, want ErrWriteTimeout", err)
	}
	if got := readUntilQuiet(t, master, time.Second); got >= n {
		t.Fatalf("the line delivered %d bytes after the timeout, all %d the kernel took", got, n)
	}
}

// readUntilQuiet reads f until nothing arrives for quiet and returns how
// many bytes it read.
func readUntilQuiet(t *testing.T, master *os.File, quiet time.Duration) int {
	t.Helper()
	f := pollable(t, master)
	buf := make([]byte, 64<<10)
	total := 0
	for {
		f.SetReadDeadline(time.Now().Add(quiet))
		n, err := f.Read(buf)
		total += n
		if err != nil {
			return total
		}
	}
}

func TestLinkRoundTripAndGarbage(t *testing.T) {
	master, path := newPTY(t)
	l := mustDial(t, testConfig(path), NewLineDecoder(64))
	if _, err := l.Send(ctxTimeout(t, time.Second), []byte("*IDN?\n")); err != nil {
		t.Fatal(err)
	}
	if got := string(readN(t, master, 6)); got != "*IDN?\n" {
		t.Fatalf("master read %q", got)
	}
	master.Write([]byte("\x15\x03noise\nSIM,1\r\n"))
	if m := recv(t, l); !errors.Is(m.Err, ErrGarbage) {
		t.Fatalf("first message = %+v, want garbage", m)
	}
	if m := recv(t, l); m.Err != nil || string(m.Data) != "SIM,1" {
		t.Fatalf("second message = %q, %v", m.Data, m.Err)
	}
}

func TestFlushDropsPendingInput(t *testing.T) {
	master, path := newPTY(t)
	l := mustDial(t, testConfig(path), NewLineDecoder(64))
	master.Write([]byte("late reply\nhalf"))
	if m := recv(t, l); string(m.Data) != "late reply" {
		t.Fatalf("got %q", m.Data)
	}
	l.Flush()
	master.Write([]byte("OK\n"))
	if m := recv(t, l); string(m.Data) != "OK" {
		t.Fatalf("after Flush got %q, %v; want OK (the half line dropped)", m.Data, m.Err)
	}
}

// TestReaderDoesNotSpin: on an idle port each read waits for the read
// timeout, so reads stay within elapsed/timeout (+ slack); a spinning
// reader would make thousands.
func TestReaderDoesNotSpin(t *testing.T) {
	_, path := newPTY(t)
	cfg := testConfig(path)
	start := time.Now()
	l := mustDial(t, cfg, NewLineDecoder(64))
	time.Sleep(10 * cfg.ReadTimeout)
	reads := l.reads.Load()
	limit := int64(time.Since(start)/cfg.ReadTimeout) + 3
	if reads > limit {
		t.Fatalf("%d reads on an idle port, want ≤ %d", reads, limit)
	}
	if reads == 0 {
		t.Fatal("reader made no reads")
	}
}

func TestUnplugReportsAndReopens(t *testing.T) {
	master, path := newPTY(t)
	by := link(t, path)
	l := mustDial(t, testConfig(by), NewLineDecoder(64))
	events := make(chan bool, 8)
	l.OnAvailability(func(ok bool, _ string) { events <- ok })

	lost := l.Lost()
	master.Close() // unplug
	expectEvent(t, events, false)
	select {
	case <-lost:
	default:
		t.Fatal("Lost() channel not closed after unplug")
	}
	_, err := l.Send(ctxTimeout(t, time.Second), []byte("x\n"))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Send while unplugged = %v, want ErrUnavailable", err)
	}
	master2, path2 := newPTY(t)
	repoint(t, by, path2) // plugged in again, under a new node
	expectEvent(t, events, true)
	if _, err := l.Send(ctxTimeout(t, time.Second), []byte("x\n")); err != nil {
		t.Fatalf("Send after reopen: %v", err)
	}
	if got := string(readN(t, master2, 2)); got != "x\n" {
		t.Fatalf("new master read %q", got)
	}
}

func TestDialAbsentPortStartsUnavailable(t *testing.T) {
	missing := t.TempDir() + "/not-plugged"
	l := mustDial(t, testConfig(missing), NewLineDecoder(64))
	events := make(chan bool, 8)
	l.OnAvailability(func(ok bool, _ string) { events <- ok })
	expectEvent(t, events, false)
	_, path := newPTY(t)
	if err := os.Symlink(path, missing); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, events, true)
}

func expectEvent(t *testing.T, events <-chan bool, want bool) {
	t.Helper()
	select {
	case got := <-events:
		if got != want {
			t.Fatalf("availability %v, want %v", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no availability report (want %v)", want)
	}
}
