//go:build !linux

package groupcommit

import "os"

// fdatasync flushes f; where there is no fdatasync, fsync does.
func fdatasync(f *os.File) error { return f.Sync() }
