package simfirmware

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/fencegate/fencegate/transport/serial"
)

// wire is the firmware's end of the line.
type wire interface {
	io.ReadWriteCloser
	Node() string
	// Stall makes the line stop carrying bytes toward the firmware, as a
	// line whose CTS is low: what the agent sends next waits in its
	// kernel's queue. Resume ends the stall. Both are for the control
	// goroutine; Close resumes first.
	Stall() error
	Resume()
}

// ptyWire is a pseudo-terminal: the firmware holds the master only. The
// agent must be the slave's sole opener (it refuses a port another process
// has open), so while no agent is attached the master reads EIO and Read
// waits.
type ptyWire struct {
	master *os.File
	node   string
	link   string // the symlink to node; removed at Close, as udev removes a by-id link

	gate  sync.Mutex // held by Read around each read, and by a stall throughout
	mu    sync.Mutex // guards stall
	stall *os.File   // the slave, opened to fill the line, while stalled
}

// openPTY creates a raw pseudo-terminal and points link at its slave.
func openPTY(link string) (*ptyWire, error) {
	master, slave, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pseudo-terminal: %w", err)
	}
	if master, err = pollable(master); err != nil {
		slave.Close()
		return nil, err
	}
	w := &ptyWire{master: master, node: slave.Name(), link: link}
	err = errors.Join(makeRaw(slave), slave.Close())
	if err == nil {
		err = repoint(link, w.node)
	}
	if err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// pollable returns f as a non-blocking, poller-registered file, so that
// Close interrupts a Read blocked in another goroutine (pty.Open leaves the
// master in blocking mode, where it would not).
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil, fmt.Errorf("dup pty master: %w", err)
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pty master: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

func makeRaw(f *os.File) error {
	fd := int(f.Fd())
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return fmt.Errorf("raw mode: %w", err)
	}
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag = t.Cflag&^(unix.CSIZE|unix.PARENB) | unix.CS8
	return unix.IoctlSetTermios(fd, unix.TCSETS, t)
}

// repoint makes link a symlink to target, atomically.
func repoint(link, target string) error {
	tmp := link + ".new"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, link)
}

// noPeerPoll is how often Read looks again while no agent has the slave
// open.
const noPeerPoll = 5 * time.Millisecond

// Read blocks until bytes arrive or the wire is closed; it reads nothing
// while the line is stalled.
func (w *ptyWire) Read(b []byte) (int, error) {
	for {
		n, err := w.readOnce(b)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded) && n == 0:
		case errors.Is(err, syscall.EIO):
			time.Sleep(noPeerPoll)
		case errors.Is(err, os.ErrDeadlineExceeded):
			return n, nil
		default:
			return n, err
		}
	}
}

// readOnce reads for a short while, under the gate a stall holds.
func (w *ptyWire) readOnce(b []byte) (int, error) {
	w.gate.Lock()
	defer w.gate.Unlock()
	w.master.SetReadDeadline(time.Now().Add(10 * noPeerPoll))
	return w.master.Read(b)
}

// Stall stops reading the master and fills the master's receive buffer
// from a second descriptor on the slave (opening it past the agent's
// TIOCEXCL needs CAP_SYS_ADMIN), so that the agent's next bytes wait in
// the kernel's queue, where its flush can still discard them.
func (w *ptyWire) Stall() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stall != nil {
		return errors.New("already stalled")
	}
	w.gate.Lock()
	f, err := os.OpenFile(w.node, os.O_RDWR|syscall.O_NOCTTY, 0)
	if err == nil {
		err = w.fill(f)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		w.gate.Unlock()
		return fmt.Errorf("stall: %w", err)
	}
	w.stall = f
	return nil
}

// fill writes zero bytes (empty frames) through the slave f until the
// master's receive buffer is full and settled.
func (w *ptyWire) fill(f *os.File) error {
	if _, err := f.Write(make([]byte, 8<<10)); err != nil {
		return err
	}
	last, same := -1, 0
	for end := time.Now().Add(10 * time.Second); same < 5; time.Sleep(noPeerPoll) {
		n, err := w.pending()
		switch {
		case err != nil:
			return err
		case time.Now().After(end):
			return errors.New("the receive buffer did not settle")
		case n > 0 && n == last:
			same++
		default:
			last, same = n, 0
		}
	}
	return nil
}

// pending is how many bytes wait in the master's receive buffer.
func (w *ptyWire) pending() (int, error) {
	rc, err := w.master.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil {
		return 0, err
	}
	return n, ierr
}

// Resume ends a stall; the firmware reads the filler (empty frames) and
// whatever the agent sent after it.
func (w *ptyWire) Resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stall == nil {
		return
	}
	w.stall.Close()
	w.stall = nil
	w.gate.Unlock()
}

func (w *ptyWire) Write(b []byte) (int, error) { return w.master.Write(b) }
func (w *ptyWire) Node() string                { return w.node }

// Close unplugs the wire: it removes the link if it still points at this
// terminal (so an agent reopening the link finds nothing, rather than
// whatever terminal gets the number next) and closes the master.
func (w *ptyWire) Close() error {
	w.Resume()
	if target, err := os.Readlink(w.link); err == nil && target == w.node {
		os.Remove(w.link) // the terminal number may go to another terminal: nothing must lead there
	}
	return w.master.Close()
}

// portWire is a real serial port (the other end of a cable to the agent).
type portWire struct{ p *serial.Port }

func openPort(path string, baud int) (*portWire, error) {
	p, err := serial.OpenPort(serial.Config{Path: path, Baud: baud})
	if err != nil {
		return nil, err
	}
	return &portWire{p: p}, nil
}

// Read blocks until bytes arrive or the port fails.
func (w *portWire) Read(b []byte) (int, error) {
	for {
		n, err := w.p.Read(b)
		if n > 0 || err != nil {
			return n, err
		}
	}
}

func (w *portWire) Write(b []byte) (int, error) {
	if _, err := w.p.Write(b, time.Now().Add(2*time.Second)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (w *portWire) Node() string { return w.p.Path() }

// Stall is not supported on a real port (it would need the agent's side
// to use RTS/CTS flow control).
func (w *portWire) Stall() error { return errors.New("stall needs a pseudo-terminal (--link)") }
func (w *portWire) Resume()      {}
func (w *portWire) Close() error { return w.p.Close() }
