package lossyfs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Errors of Mount and Cut.
var (
	// ErrUnavailable: FUSE cannot be mounted here (no /dev/fuse, not root).
	ErrUnavailable = errors.New("lossyfs: FUSE unavailable")
	// ErrMounted: the FS is already mounted; one mount at a time.
	ErrMounted = errors.New("lossyfs: already mounted")
	// ErrUnmounted: the mount was already torn down by Unmount.
	ErrUnmounted = errors.New("lossyfs: not mounted")
)

// Available returns nil if this process can mount an FS, else an error
// wrapping ErrUnavailable that says why.
func Available() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("%w: /dev/fuse: %w", ErrUnavailable, err)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: mount(2) needs root, euid is %d", ErrUnavailable, os.Geteuid())
	}
	return nil
}

// Mount is an FS served at a directory. Its methods are safe for
// concurrent use, but Cut and Unmount must not race with the caller's own
// use of the directory: the caller stops its users of the mount first (or
// registers them as processes for Cut to kill).
type Mount struct {
	tree *FS
	dir  string

	mu     sync.Mutex // guards server and procs
	server *fuse.Server
	procs  []*os.Process
}

// Mount serves f at dir, an existing empty directory, until Unmount. The
// FS can be mounted again after Unmount, also elsewhere.
func (f *FS) Mount(dir string) (*Mount, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	m := &Mount{tree: f, dir: dir}
	if err := m.serve(); err != nil {
		return nil, err
	}
	return m, nil
}

// serve mounts m.tree at m.dir; m.mu must be held or m unshared.
func (m *Mount) serve() error {
	if !m.tree.claim(true) {
		return ErrMounted
	}
	root := &fuseNode{tree: m.tree, n: m.tree.root}
	opts := &fs.Options{MountOptions: fuse.MountOptions{
		DirectMount: true, DirectMountStrict: true, FsName: "lossyfs", Name: "lossyfs",
	}}
	server, err := fs.Mount(m.dir, root, opts)
	if err != nil {
		m.tree.claim(false)
		return fmt.Errorf("lossyfs: mount %s: %w", m.dir, err)
	}
	if err := closeOnExecFuse(); err != nil {
		_ = server.Unmount()
		m.tree.claim(false)
		return err
	}
	m.server = server
	return nil
}

// closeOnExecFuse marks this process's /dev/fuse descriptors close-on-exec:
// go-fuse opens the device without O_CLOEXEC, and a child that inherited
// it would keep the connection open after the test process died, its own
// requests on the mount then waiting forever. Children started while a
// Mount is being set up may still inherit it.
func closeOnExecFuse() error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("lossyfs: list descriptors: %w", err)
	}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		fd, aerr := strconv.Atoi(e.Name())
		if err == nil && aerr == nil && target == "/dev/fuse" {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

// claim marks f mounted (on) or not and reports whether that changed it.
func (f *FS) claim(on bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mounted == on {
		return false
	}
	f.mounted = on
	return true
}

// Dir returns the mount point.
func (m *Mount) Dir() string { return m.dir }

// Register names a process that uses the mount: the next Cut kills it
// (SIGKILL) first. The caller still reaps it (exec.Cmd.Wait).
func (m *Mount) Register(p *os.Process) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.procs = append(m.procs, p)
}

// Unmount tears the mount down; the FS keeps its current (not only its
// durable) state. If a process still holds files open, the mount is
// detached lazily and Unmount waits until the last one is closed.
// Unmounting twice returns ErrUnmounted.
func (m *Mount) Unmount() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unmount()
}

// unmount is Unmount with m.mu held.
func (m *Mount) unmount() error {
	if m.server == nil {
		return ErrUnmounted
	}
	if err := m.server.Unmount(); err != nil {
		if derr := syscall.Unmount(m.dir, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("lossyfs: unmount %s: %w (lazy: %w)", m.dir, err, derr)
		}
		m.server.Wait()
	}
	m.server = nil
	m.tree.claim(false)
	return nil
}

// CutOptions shape a power cut. The zero value drops every unsynced write.
type CutOptions struct {
	// Torn keeps a random prefix of each file's unsynced writes, the last
	// one cut at a page boundary, chosen with Rand (default: a random
	// seed).
	Torn bool
	Rand *rand.Rand
	// Capture names files (slash-separated paths relative to the mount)
	// whose content at the moment of the cut — after the kill, before the
	// revert: what a reader last saw — CutReport.Captured returns. It lets
	// a test see every write made until the power went, even those the cut
	// then loses.
	Capture []string
}

// Cut simulates a power loss: it kills the registered processes, tears
// the mount down (no page cache survives), reverts every file and
// directory to its durable state (see CutOptions) and mounts the FS again
// at the same directory. Processes the caller did not register must be
// dead, or at least hold nothing open on the mount, before Cut.
func (m *Mount) Cut(opts CutOptions) (CutReport, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.procs {
		_ = p.Kill() // already dead is fine
	}
	m.procs = nil
	if err := m.unmount(); err != nil {
		return CutReport{}, err
	}
	r := opts.Rand
	if opts.Torn && r == nil {
		r = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if !opts.Torn {
		r = nil
	}
	captured := m.tree.capture(opts.Capture)
	rep := m.tree.revert(r)
	rep.Captured = captured
	return rep, m.serve()
}

// CopyOut copies the file name (relative to the mount) to dst, through
// read(2) only, so the test process serving the mount can inspect it
// safely (see the package doc on mmap). dst is created or truncated with
// mode 0600.
func (m *Mount) CopyOut(name, dst string) error {
	b, err := os.ReadFile(filepath.Join(m.dir, name))
	if err != nil {
		return fmt.Errorf("lossyfs: copy out: %w", err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		return fmt.Errorf("lossyfs: copy out: %w", err)
	}
	return nil
}

// StopAfter makes the power go after n more changing operations (create,
// write, truncate, rename, link, unlink, mkdir, rmdir, fsync): from then
// on every changing operation fails with EIO and changes nothing, as if
// the machine had stopped there, until the next Cut. It lets a test cut
// at every step of a sequence of system calls. Negative n: no limit.
func (m *Mount) StopAfter(n int) {
	m.tree.mu.Lock()
	defer m.tree.mu.Unlock()
	m.tree.budget = n
}

// Stopped reports whether a StopAfter budget ran out since the last Cut.
func (m *Mount) Stopped() bool {
	m.tree.mu.Lock()
	defer m.tree.mu.Unlock()
	return m.tree.budget == 0
}
