package benchload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// RawWriteSize is the size of RawFsync's write, one page.
const RawWriteSize = 4096

// RawFsyncFile is the name of RawFsync's scratch file in its directory.
const RawFsyncFile = "raw-fsync.dat"

// RawFsync measures the disk's raw rate of durable writes, the baseline for
// every commit rate: in dir, it overwrites RawWriteSize bytes at offset 0 of
// one file and fdatasyncs (fsync where the OS has no fdatasync), in a loop,
// for d, one operation per sync. The file is made and synced once before
// timing starts (so no timed sync has to allocate) and removed at the end.
// Cancelling ctx stops the loop; RawFsync then returns ctx's error.
func RawFsync(ctx context.Context, dir string, d time.Duration) (res Result, err error) {
	f, err := os.OpenFile(filepath.Join(dir, RawFsyncFile), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return Result{}, fmt.Errorf("raw fsync: %w", err)
	}
	defer func() {
		err = errors.Join(err, f.Close(), os.Remove(f.Name()))
	}()
	page := make([]byte, RawWriteSize)
	op := func(context.Context, int, int) error {
		if _, err := f.WriteAt(page, 0); err != nil {
			return err
		}
		return syncData(f)
	}
	if err := op(ctx, 0, 0); err != nil {
		return Result{}, fmt.Errorf("raw fsync: %w", err)
	}
	res, err = Run(ctx, 1, Limit{Duration: d}, op)
	if err != nil {
		return res, fmt.Errorf("raw fsync: %w", err)
	}
	return res, nil
}
