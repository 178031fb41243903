package serial

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// lockNode opens path non-blocking (no controlling terminal) and takes an
// exclusive advisory flock on it. The descriptor it returns holds the lock
// until closed. A node held by flock, or by another opener's TIOCEXCL,
// gives ErrHeld.
func lockNode(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.EBUSY):
		return -1, fmt.Errorf("%w: %s is opened exclusively (TIOCEXCL)", ErrHeld, path)
	case err != nil:
		return -1, fmt.Errorf("serial: open %s: %w", path, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return -1, fmt.Errorf("%w: %s is locked (flock)", ErrHeld, path)
		}
		return -1, fmt.Errorf("serial: flock %s: %w", path, err)
	}
	return fd, nil
}

// setExclusive sets TIOCEXCL on the terminal behind fd: later opens of the
// node fail with EBUSY (except for processes with CAP_SYS_ADMIN, which the
// flock still stops if they ask for it).
func setExclusive(fd int) error {
	return unix.IoctlSetInt(fd, unix.TIOCEXCL, 0)
}

// ioPath is where to open the port for I/O: the very node fd holds the
// flock on, even if the configured path (a by-id link) was repointed since.
func ioPath(fd int, _ string) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// checkExclusive verifies, after TIOCEXCL, that the terminal behind fd is
// in exclusive mode and that no other process has it open — one that got
// in before TIOCEXCL took effect, or a terminal program that was there
// first. Processes this one may not inspect (other users', when it runs
// unprivileged) are not seen.
func checkExclusive(fd int, path string) error {
	v, err := unix.IoctlGetInt(fd, unix.TIOCGEXCL)
	switch {
	case err != nil:
		return fmt.Errorf("serial: %s: read back exclusive mode (TIOCGEXCL): %w", path, err)
	case v == 0:
		return fmt.Errorf("serial: %s: exclusive mode (TIOCEXCL) did not take effect", path)
	}
	others, err := otherOpeners(fd)
	if err != nil {
		return fmt.Errorf("serial: %s: look for other openers: %w", path, err)
	}
	if len(others) > 0 {
		return fmt.Errorf("%w: %s is also open in %s", ErrHeld, path, strings.Join(others, ", "))
	}
	return nil
}

// otherOpeners names the processes other than this one with a descriptor
// on the terminal behind fd, as "pid N (command)". A terminal is found by
// its device number, whatever node or name it was opened through (a copied
// node, a container's renamed device), and through /dev/tty in a process
// whose controlling terminal it is.
func otherOpeners(fd int) ([]string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := strconv.Itoa(os.Getpid())
	var found []string
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err == nil && p.Name() != self && holds(p.Name(), st.Rdev) {
			found = append(found, describe(p.Name()))
		}
	}
	return found, nil
}

// devTTY is /dev/tty's device number: a descriptor on it is the process's
// controlling terminal.
var devTTY = unix.Mkdev(5, 0)

// holds reports whether process pid has the terminal rdev open; a process
// that is gone or not ours to inspect does not.
func holds(pid string, rdev uint64) bool {
	dir := "/proc/" + pid + "/fd/"
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, f := range fds {
		// Only descriptors on /dev nodes are stat'ed: stat through a
		// descriptor on a hung network or FUSE file system would block.
		if l, err := os.Readlink(dir + f.Name()); err != nil || !strings.HasPrefix(l, "/dev/") {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(dir+f.Name(), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
			continue
		}
		if st.Rdev == rdev || (st.Rdev == devTTY && controllingTTY(pid) == rdev) {
			return true
		}
	}
	return false
}

// controllingTTY is the device number of pid's controlling terminal (the
// tty_nr field of /proc/pid/stat), or 0.
func controllingTTY(pid string) uint64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')') // comm may hold spaces and parentheses
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:])) // state ppid pgrp session tty_nr …
	if len(f) < 5 {
		return 0
	}
	nr, err := strconv.ParseInt(f[4], 10, 64)
	if err != nil || nr <= 0 {
		return 0
	}
	// tty_nr encodes major in bits 8..15 and minor in bits 0..7 and 20..31.
	return unix.Mkdev(uint32(nr>>8)&0xfff, uint32(nr&0xff)|uint32(nr>>12)&0xfff00)
}

func describe(pid string) string {
	comm, _ := os.ReadFile("/proc/" + pid + "/comm")
	return fmt.Sprintf("pid %s (%s)", pid, strings.TrimSpace(string(comm)))
}

// unlockNode releases the flock and closes fd.
func unlockNode(fd int) error {
	uerr := unix.Flock(fd, unix.LOCK_UN)
	return errors.Join(uerr, unix.Close(fd))
}

// writeNB writes b to the non-blocking fd, waiting for room until
// deadline. It returns how many bytes the kernel took, also on failure.
func writeNB(fd int, b []byte, deadline time.Time) (int, error) {
	written := 0
	for written < len(b) {
		n, err := unix.Write(fd, b[written:])
		if n > 0 {
			written += n
		}
		switch {
		case err == nil && n > 0, errors.Is(err, unix.EINTR):
		case err == nil, errors.Is(err, unix.EAGAIN):
			if err := waitWritable(fd, deadline); err != nil {
				return written, err
			}
		default:
			return written, err
		}
	}
	return written, nil
}

// waitWritable polls fd for room to write until deadline.
func waitWritable(fd int, deadline time.Time) error {
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return ErrWriteTimeout
		}
		ms := int((left + time.Millisecond - 1) / time.Millisecond)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, ms)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return err
		case n == 0:
			continue // the loop re-checks the deadline
		case fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0:
			return unix.EIO
		}
		return nil
	}
}
