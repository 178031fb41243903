package serial

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// holdEnv makes the test binary, re-executed, open the node named by its
// value as a terminal program would (no flock), say "held" and keep it
// open until its stdin closes.
const holdEnv = "FENCEGATE_SERIAL_PROBE_HOLD"

func holdOpen(path string) int {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	os.Stdout.WriteString("held\n")
	io.Copy(io.Discard, os.Stdin)
	unix.Close(fd)
	return 0
}

// holder is another process holding a node open.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startHolder starts a process that opens path and returns once it has.
func startHolder(t *testing.T, path string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+path)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, stdin: stdin}
	t.Cleanup(h.stop)
	if l, _ := bufio.NewReader(out).ReadString('\n'); l != "held\n" {
		t.Fatalf("holder did not open %s: %q", path, l)
	}
	return h
}

func (h *holder) stop() {
	h.stdin.Close()
	h.cmd.Wait()
}

// withOpenHook runs hook once, in the next OpenPort, between taking the
// flock and TIOCEXCL.
func withOpenHook(t *testing.T, hook func()) {
	old := testHookOpened
	testHookOpened = func() {
		testHookOpened = old
		hook()
	}
	t.Cleanup(func() { testHookOpened = old })
}

// TestSerialOpenWindow: another opener that gets in between the open and
// TIOCEXCL is found and the open refused; a by-id link repointed in that
// window cannot split the lock and the I/O over two devices.
func TestSerialOpenWindow(t *testing.T) {
	t.Run("intruder refused", func(t *testing.T) {
		_, path := newPTY(t)
		var h *holder
		withOpenHook(t, func() { h = startHolder(t, path) })
		p, err := OpenPort(testConfig(path))
		if err == nil {
			p.Close()
			t.Fatalf("OpenPort succeeded while pid %d holds %s", h.cmd.Process.Pid, path)
		}
		if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(h.cmd.Process.Pid)) {
			t.Fatalf("OpenPort = %v, want ErrHeld naming pid %d", err, h.cmd.Process.Pid)
		}
		h.stop()
		p, err = OpenPort(testConfig(path))
		if err != nil {
			t.Fatalf("OpenPort once the intruder left: %v", err)
		}
		p.Close()
	})
	t.Run("link repointed", func(t *testing.T) {
		master, path := newPTY(t)
		_, other := newPTY(t)
		by := link(t, path)
		withOpenHook(t, func() { repoint(t, by, other) })
		p, err := OpenPort(testConfig(by))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		master.Write([]byte("ping"))
		if got := readPort(t, p, 4); got != "ping" {
			t.Fatalf("port read %q from the locked device, want ping", got)
		}
	})
}

// readPort reads n bytes from p, giving up after 10 s.
func readPort(t *testing.T, p *Port, n int) string {
	t.Helper()
	var got []byte
	buf := make([]byte, n)
	for end := time.Now().Add(10 * time.Second); len(got) < n && time.Now().Before(end); {
		k, err := p.Read(buf[:n-len(got)])
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		got = append(got, buf[:k]...)
	}
	return string(got)
}
