package benchload

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncData flushes f's data (not its metadata) to the disk, as bbolt's
// commit does on Linux.
func syncData(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
