package serial

import (
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
// on the node behind fd, as "pid N (command)".
func otherOpeners(fd int) ([]string, error) {
	node, err := os.Readlink(ioPath(fd, ""))
	if err != nil {
		return nil, err
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := strconv.Itoa(os.Getpid())
	var found []string
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err == nil && p.Name() != self && holds(p.Name(), node) {
			found = append(found, describe(p.Name()))
		}
	}
	return found, nil
}

// holds reports whether process pid has node open; a process that is gone
// or not ours to inspect does not.
func holds(pid, node string) bool {
	dir := "/proc/" + pid + "/fd/"
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, f := range fds {
		if l, err := os.Readlink(dir + f.Name()); err == nil && l == node {
			return true
		}
	}
	return false
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
