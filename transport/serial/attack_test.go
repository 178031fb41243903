package serial

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// holdAsControllingTTY starts a real child process in a session of its own
// whose controlling terminal is the slave at path; the child opens the
// terminal again as /dev/tty, closes the descriptor it got by path and
// keeps /dev/tty open until the test ends (a program that talks to "its
// terminal", like a login prompt or a program run on a serial console).
func holdAsControllingTTY(t *testing.T, path string) {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skipf("needs sh for the second opener: %v", err)
	}
	slave, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `exec 3<>/dev/tty 0<&- && echo ready && exec sleep 600`)
	cmd.Stdin = slave
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	err = cmd.Start()
	slave.Close() // the child has its own; this process must not hold the node
	if err != nil {
		t.Skipf("cannot start a process with the pseudo-terminal as its controlling terminal: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if l, err := bufio.NewReader(out).ReadString('\n'); l != "ready\n" {
		t.Fatalf("second opener did not open /dev/tty: %q, %v", l, err)
	}
}

// TestAttackAliasOpenerNotSeen breaks I7 (the agent holds serial ports
// exclusively): another process that has the same terminal open through
// another node than the configured path is not seen by OpenPort. Here the
// other node is /dev/tty (the child's controlling terminal); on hardware it
// is a container's device mapped under another name (docker --device
// /dev/ttyUSB0:/dev/ttyS9) or a mknod'd copy. The flock is per inode, so it
// never meets the other node, and checkExclusive compares the text of
// /proc/<pid>/fd links with this node's path instead of device numbers.
// Control: the same kind of holder on the node's own path is refused.
func TestAttackAliasOpenerNotSeen(t *testing.T) {
	t.Run("control: same path", func(t *testing.T) {
		_, path := newPTY(t)
		startHolder(t, path)
		p, err := OpenPort(testConfig(path))
		if err == nil {
			p.Close()
		}
		if !errors.Is(err, ErrHeld) {
			t.Fatalf("OpenPort while another process has %s open = %v, want ErrHeld", path, err)
		}
	})
	t.Run("held as /dev/tty", func(t *testing.T) {
		_, path := newPTY(t)
		holdAsControllingTTY(t, path)
		p, err := OpenPort(testConfig(path))
		if err == nil {
			p.Close()
		}
		if !errors.Is(err, ErrHeld) {
			t.Fatalf("OpenPort while another process has the same terminal open as /dev/tty = %v, want ErrHeld", err)
		}
	})
}
