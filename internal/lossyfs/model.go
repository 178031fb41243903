package lossyfs

import (
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"time"
)

// pageSize is the granularity of a torn write.
const pageSize = 4096

// FS is the in-memory tree with its durable shadow. Its methods are safe
// for concurrent use; the FUSE server calls them from many goroutines.
type FS struct {
	mu      sync.Mutex // guards nextIno, mounted and every node's fields
	root    *node
	nextIno uint64
	mounted bool // a Mount serves the FS
	// budget is how many more changing operations succeed (see
	// Mount.StopAfter); negative: no limit.
	budget int
}

// node is a regular file or a directory. A file's data is what readers see,
// durable what survives a cut and pending the writes since the last sync
// (applied to durable by a sync, partly by a torn cut). A directory's
// entries are what lookups see and durableEntries what survives a cut.
type node struct {
	ino   uint64
	mode  uint32 // file type and permission bits, as in stat(2)
	mtime time.Time

	data    []byte
	durable []byte
	pending []write

	entries        map[string]*node
	durableEntries map[string]*node
}

// write is one unsynced change of a file: data at off, or, if truncate,
// a change of size to off.
type write struct {
	off      int64
	data     []byte
	truncate bool
}

// New returns an FS holding an empty, durable root directory.
func New() *FS {
	f := &FS{nextIno: 1, budget: -1}
	f.root = f.newNode(syscall.S_IFDIR | 0o755)
	return f
}

// spend uses one changing operation of the budget and reports EIO once
// the power is gone (see Mount.StopAfter); f.mu must be held.
func (f *FS) spend() syscall.Errno {
	switch {
	case f.budget == 0:
		return syscall.EIO
	case f.budget > 0:
		f.budget--
	}
	return 0
}

// newNode returns a fresh node of mode; f.mu must be held (or f unshared).
func (f *FS) newNode(mode uint32) *node {
	f.nextIno++
	n := &node{ino: f.nextIno, mode: mode, mtime: time.Now()}
	if n.isDir() {
		n.entries, n.durableEntries = map[string]*node{}, map[string]*node{}
	}
	return n
}

func (n *node) isDir() bool { return n.mode&syscall.S_IFMT == syscall.S_IFDIR }

// writeAt changes n's current content as pwrite(2) does and remembers the
// write until the next sync.
func (n *node) writeAt(data []byte, off int64) {
	n.data = applyWrite(n.data, write{off: off, data: data})
	n.pending = append(n.pending, write{off: off, data: append([]byte(nil), data...)})
	n.mtime = time.Now()
}

// truncate changes n's current size as ftruncate(2) does.
func (n *node) truncate(size int64) {
	n.data = applyWrite(n.data, write{off: size, truncate: true})
	n.pending = append(n.pending, write{off: size, truncate: true})
	n.mtime = time.Now()
}

// applyWrite returns b changed by w; b may be modified in place.
func applyWrite(b []byte, w write) []byte {
	end := w.off + int64(len(w.data))
	if w.truncate {
		end = w.off
	}
	if int64(len(b)) < end {
		b = append(b, make([]byte, end-int64(len(b)))...)
	}
	if w.truncate {
		return b[:end]
	}
	copy(b[w.off:], w.data)
	return b
}

// sync makes n's current state durable: content for a file, entries for a
// directory.
func (n *node) sync() {
	if n.isDir() {
		n.durableEntries = maps.Clone(n.entries)
		return
	}
	for _, w := range n.pending {
		n.durable = applyWrite(n.durable, w)
	}
	n.pending = nil
}

// CutReport says what a cut dropped.
type CutReport struct {
	// Files is how many files had unsynced writes and Writes how many
	// there were (with CutOptions.Torn, a prefix of them may be kept).
	Files, Writes int
	// Entries is how many directories had unsynced entry changes.
	Entries int
	// Captured holds, for each file CutOptions.Capture named that existed
	// at the cut, its content then (before the revert).
	Captured map[string][]byte
}

// capture returns the current content of each regular file of names
// (slash-separated paths from the root) that exists.
func (f *FS) capture(names []string) map[string][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]byte{}
	for _, name := range names {
		if n := f.lookupPath(name); n != nil && !n.isDir() {
			out[name] = append([]byte(nil), n.data...)
		}
	}
	return out
}

// lookupPath returns the node at the slash-separated path name, or nil;
// f.mu must be held.
func (f *FS) lookupPath(name string) *node {
	n := f.root
	for _, part := range strings.Split(strings.Trim(name, "/"), "/") {
		if part == "" {
			continue
		}
		if !n.isDir() || n.entries[part] == nil {
			return nil
		}
		n = n.entries[part]
	}
	return n
}

// revert brings every node reachable from the durable root back to its
// durable state. With r non-nil a random prefix of each file's unsynced
// writes, the last of them cut at a page boundary, is kept first.
func (f *FS) revert(r *rand.Rand) CutReport {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.budget = -1
	var rep CutReport
	seen := map[*node]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		n.revert(r, &rep)
		for _, c := range n.entries {
			walk(c)
		}
	}
	walk(f.root)
	return rep
}

// revert brings n back to its durable state (see FS.revert).
func (n *node) revert(r *rand.Rand, rep *CutReport) {
	if n.isDir() {
		if !maps.Equal(n.entries, n.durableEntries) {
			rep.Entries++
		}
		n.entries = maps.Clone(n.durableEntries)
		return
	}
	if len(n.pending) > 0 {
		rep.Files++
		rep.Writes += len(n.pending)
		if r != nil {
			n.durable = tear(n.durable, n.pending, r)
		}
	}
	n.data, n.pending = append([]byte(nil), n.durable...), nil
}

// tear applies a random prefix of pending to durable, the last write of it
// cut to a random number of whole pages, and returns the result.
func tear(durable []byte, pending []write, r *rand.Rand) []byte {
	k := r.IntN(len(pending) + 1)
	for _, w := range pending[:k] {
		durable = applyWrite(durable, w)
	}
	if k == len(pending) {
		return durable
	}
	w := pending[k]
	if w.truncate {
		return durable
	}
	pages := (len(w.data) + pageSize - 1) / pageSize
	if keep := r.IntN(pages+1) * pageSize; keep > 0 {
		durable = applyWrite(durable, write{off: w.off, data: w.data[:min(keep, len(w.data))]})
	}
	return durable
}
