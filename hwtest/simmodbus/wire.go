package simmodbus

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/fencegate/fencegate/transport/serial"
)

// wire is the PLC's end of the line.
type wire interface {
	io.ReadWriteCloser
	Node() string
}

// ptyWire is a pseudo-terminal: the PLC holds the master only, so that the
// agent can be the slave's sole opener. While no agent has the slave open
// the master reads EIO, and Read waits.
type ptyWire struct {
	master *os.File
	node   string
	link   string // the symlink to node; removed at Close, as udev removes a by-id link
}

// openPTY creates a raw pseudo-terminal and points link at its slave.
func openPTY(link string) (*ptyWire, error) {
	master, slave, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("simmodbus: open pseudo-terminal: %w", err)
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
// Close interrupts a Read blocked in another goroutine.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil, fmt.Errorf("simmodbus: dup pty master: %w", err)
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("simmodbus: pty master: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

func makeRaw(f *os.File) error {
	fd := int(f.Fd())
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return fmt.Errorf("simmodbus: raw mode: %w", err)
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

// noPeerPoll is how often Read looks again while nobody has the slave open.
const noPeerPoll = 5 * time.Millisecond

// Read blocks until bytes arrive or the wire is closed.
func (w *ptyWire) Read(b []byte) (int, error) {
	for {
		n, err := w.master.Read(b)
		if errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EAGAIN) {
			time.Sleep(noPeerPoll)
			continue
		}
		return n, err
	}
}

func (w *ptyWire) Write(b []byte) (int, error) { return w.master.Write(b) }
func (w *ptyWire) Node() string                { return w.node }

// Close unplugs the wire: it removes the link if it still points at this
// terminal (an agent reopening the link must find nothing rather than
// whatever terminal gets the number next) and closes the master.
func (w *ptyWire) Close() error {
	if target, err := os.Readlink(w.link); err == nil && target == w.node {
		os.Remove(w.link)
	}
	return w.master.Close()
}

// portWire is a real serial port.
type portWire struct{ p *serial.Port }

func openPort(cfg serial.Config) (*portWire, error) {
	p, err := serial.OpenPort(cfg)
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
func (w *portWire) Close() error { return w.p.Close() }
