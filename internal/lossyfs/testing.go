package lossyfs

import (
	"testing"
)

// MustMount mounts a fresh FS at a new temporary directory for the test
// and unmounts it in t.Cleanup, even if the test fails, so no mount
// outlives the test. Without FUSE (no /dev/fuse, not root) the test is
// skipped, saying so: CI runs as root with /dev/fuse.
func MustMount(t testing.TB) *Mount {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("%v (CI runs as root with /dev/fuse)", err)
	}
	m, err := New().Mount(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Unmount(); err != nil && err != ErrUnmounted {
			t.Errorf("unmount: %v", err)
		}
	})
	return m
}
