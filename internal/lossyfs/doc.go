// Package lossyfs is a FUSE file system for power-loss tests: it forgets
// what was never made durable.
//
// An FS keeps its whole tree in memory. For every regular file it holds the
// content readers see now and the content as last made durable; for every
// directory, the entries readers see now and the entries as last made
// durable. Mount serves the tree under a directory with go-fuse (a direct
// mount(2), so the test must run as root with /dev/fuse present). Through
// the mount:
//
//   - writes (pwrite at any offset, truncate, create, mkdir, rename,
//     unlink, rmdir) are visible at once to every reader and to mmap: the
//     kernel caches pages in write-through mode, no direct I/O;
//   - fsync or fdatasync of a file makes its current content durable;
//     fsync of a directory makes its current entries durable (a new file
//     survives a cut only once its directory was fsynced, as POSIX asks);
//   - Mount.Cut is a power loss: registered processes are killed, the
//     mount is torn down (no kernel page cache outlives it), every file and
//     directory reachable from the durable root reverts to its durable
//     state, and the tree is mounted again at the same place. With
//     CutOptions.Torn a random prefix of each file's unsynced writes, in
//     write order and cut at a 4 KiB page boundary, is kept, as a disk that
//     wrote some sectors before the power went does.
//
// What is not simulated: drive write caches that acknowledge a flush and
// lose it anyway (a lying disk: no file system test can see past it);
// reordering of unsynced writes (a torn file keeps a prefix of its write
// order, never a later write without an earlier one); partial directory
// updates (a directory's unsynced entry changes are all lost together);
// metadata other than size (modes and times are kept as they are); link
// counts (link(2) works, stat says 1), symlinks, xattrs and file locks
// beyond what the kernel does itself (flock works: the kernel keeps it
// locally). A rename
// made durable in the new directory only leaves the file reachable under
// both names after a cut.
//
// Never mmap a file of the mount — nor open bbolt on it, which maps its
// file — from the process that serves the mount. A page fault waiting for
// the FUSE server cannot be preempted, so the Go runtime's next
// stop-the-world (a GC) waits for it while the server waits for the GC: the
// process deadlocks. Open such files from child processes (they are the
// processes under test anyway) and copy a file out with Mount.CopyOut
// (read(2) only) to inspect it in the test process.
//
// Mount.StopAfter stops the machine after a number of changing operations
// (later ones fail with EIO), so a test can cut the power at every step of
// a sequence such as an atomic replace.
//
// Backing store: none — the durable state lives in the FS value, which
// outlives its mounts, so a test can cut and remount as often as it likes.
package lossyfs
