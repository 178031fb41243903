package serial

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// newPTY opens a pseudo-terminal and returns its master and the path of
// its slave node; the test's own slave descriptor is closed, so the code
// under test is the only opener. The master is closed at cleanup.
func newPTY(t *testing.T) (*os.File, string) {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("pseudo-terminals (/dev/ptmx) unavailable: %v", err)
	}
	path := slave.Name()
	slave.Close()
	t.Cleanup(func() { master.Close() })
	return master, path
}

// pollable returns a non-blocking duplicate of f, registered with Go's
// poller so that read deadlines work (pty.Open leaves the master in
// blocking mode, where they do not). It is closed at cleanup.
func pollable(t *testing.T, f *os.File) *os.File {
	t.Helper()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	p := os.NewFile(uintptr(fd), f.Name())
	t.Cleanup(func() { p.Close() })
	return p
}

// link returns a symlink in a temp dir pointing at target, standing in for
// a /dev/serial/by-id path.
func link(t *testing.T, target string) string {
	t.Helper()
	l := filepath.Join(t.TempDir(), "by-id-device")
	if err := os.Symlink(target, l); err != nil {
		t.Fatal(err)
	}
	return l
}

// repoint moves the symlink at l to target atomically.
func repoint(t *testing.T, l, target string) {
	t.Helper()
	tmp := l + ".tmp"
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, l); err != nil {
		t.Fatal(err)
	}
}

func testConfig(path string) Config {
	return Config{Path: path, ReadTimeout: 20 * time.Millisecond, ReopenMin: 10 * time.Millisecond, ReopenMax: 50 * time.Millisecond}
}

func mustDial(t *testing.T, cfg Config, dec Decoder) *Link {
	t.Helper()
	l, err := Dial(cfg, dec, nil)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// recv waits for the next message on l.
func recv(t *testing.T, l *Link) Msg {
	t.Helper()
	select {
	case m := <-l.Recv():
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message")
		return Msg{}
	}
}

// readN reads exactly n bytes from the master.
func readN(t *testing.T, f *os.File, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	f.SetReadDeadline(time.Now().Add(10 * time.Second))
	for got := 0; got < n; {
		k, err := f.Read(b[got:])
		if err != nil {
			t.Fatalf("read master: %v", err)
		}
		got += k
	}
	return b
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
