package serial

import (
	"errors"
	"fmt"
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

// unlockNode releases the flock and closes fd.
func unlockNode(fd int) error {
	uerr := unix.Flock(fd, unix.LOCK_UN)
	return errors.Join(uerr, unix.Close(fd))
}

// writeNB writes b to the non-blocking fd, waiting for room until deadline.
func writeNB(fd int, b []byte, deadline time.Time) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if n > 0 {
			b = b[n:]
		}
		switch {
		case err == nil && n > 0, errors.Is(err, unix.EINTR):
		case err == nil, errors.Is(err, unix.EAGAIN):
			if err := waitWritable(fd, deadline); err != nil {
				return err
			}
		default:
			return err
		}
	}
	return nil
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
