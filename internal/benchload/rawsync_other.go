//go:build !linux

package benchload

import "os"

// syncData flushes f to the disk with fsync, as bbolt's commit does where
// there is no fdatasync.
func syncData(f *os.File) error { return f.Sync() }
