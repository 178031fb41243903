package serial

import (
	"errors"
	"fmt"
	"sync"
	"time"

	bug "go.bug.st/serial"
)

// Port is one open, exclusively held serial port. Read and Write may be
// called concurrently with each other (one reader, one writer); Close may
// be called at any time and more than once, and makes a blocked Read
// return.
type Port struct {
	path string
	sp   bug.Port

	mu     sync.RWMutex // guards node against Close while a Write uses it
	node   int          // non-blocking descriptor holding the flock; -1 when closed
	closed bool
}

// OpenPort opens the port cfg names, in its mode, exclusively: it takes an
// flock on the node first, opens that same node (not the path again, which
// a replug may have repointed) through go.bug.st/serial, sets TIOCEXCL,
// reads it back and checks that no other process has the node open (one
// that got in before TIOCEXCL). A port someone else holds gives an error
// wrapping ErrHeld that names the holder when it is known; an invalid cfg
// gives a *ConfigError.
func OpenPort(cfg Config) (*Port, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	node, err := lockNode(cfg.Path)
	if err != nil {
		return nil, err
	}
	testHookOpened()
	sp, err := bug.Open(ioPath(node, cfg.Path), cfg.mode())
	if err != nil {
		unlockNode(node)
		return nil, openError(cfg.Path, err)
	}
	p := &Port{path: cfg.Path, sp: sp, node: node}
	if err := setExclusive(node); err != nil {
		p.Close()
		return nil, fmt.Errorf("serial: %s: set exclusive mode (TIOCEXCL): %w", cfg.Path, err)
	}
	if err := checkExclusive(node, cfg.Path); err != nil {
		p.Close()
		return nil, err
	}
	if err := sp.SetReadTimeout(cfg.ReadTimeout); err != nil {
		p.Close()
		return nil, fmt.Errorf("serial: %s: read timeout: %w", cfg.Path, err)
	}
	return p, nil
}

// testHookOpened runs between taking the flock and TIOCEXCL; tests
// set it to get into that window.
var testHookOpened = func() {}

func openError(path string, err error) error {
	var pe *bug.PortError
	if errors.As(err, &pe) && pe.Code() == bug.PortBusy {
		return fmt.Errorf("%w: %s is opened exclusively (TIOCEXCL)", ErrHeld, path)
	}
	return fmt.Errorf("serial: open %s: %w", path, err)
}

// Path is the node the port was opened at.
func (p *Port) Path() string { return p.path }

// Read reads what has arrived, waiting at most the configured read timeout:
// it returns 0, nil when nothing arrived in that time, and an error when the
// port failed (unplugged, closed).
func (p *Port) Read(b []byte) (int, error) {
	n, err := p.sp.Read(b)
	if err != nil {
		return n, fmt.Errorf("serial: read %s: %w", p.path, err)
	}
	return n, nil
}

// Write hands all of b to the kernel or fails: with an error wrapping
// ErrWriteTimeout if the port did not take it before deadline, ErrClosed
// after Close. It returns how many bytes the kernel took, also on failure:
// those may reach the device (ResetOutput discards the ones not yet sent).
func (p *Port) Write(b []byte, deadline time.Time) (int, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return 0, ErrClosed
	}
	n, err := writeNB(p.node, b, deadline)
	if err != nil {
		return n, fmt.Errorf("serial: write %s: %w", p.path, err)
	}
	return n, nil
}

// ResetInput discards what the kernel has received but nobody read yet.
func (p *Port) ResetInput() error { return p.sp.ResetInputBuffer() }

// ResetOutput discards what the kernel holds to transmit (TCOFLUSH): after
// it returns, none of it leaves the port. Bytes already on the wire, or in
// a UART's hardware FIFO that its driver does not flush, may still arrive.
func (p *Port) ResetOutput() error { return p.sp.ResetOutputBuffer() }

// Close releases the port: exclusive mode, the flock and both descriptors.
// It first discards unsent output, so that closing (which would otherwise
// wait for the queue to drain) delivers nothing late.
func (p *Port) Close() error {
	p.sp.ResetOutputBuffer() // best effort: the port may be gone
	err := p.sp.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	return errors.Join(err, unlockNode(p.node))
}
