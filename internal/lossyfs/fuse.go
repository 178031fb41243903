package lossyfs

import (
	"context"
	"slices"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// fuseNode serves one node of an FS through go-fuse. The FS is the truth:
// go-fuse's own inode tree is only a cache of what Lookup returned.
type fuseNode struct {
	fs.Inode
	tree *FS
	n    *node
}

var (
	_ fs.NodeLookuper  = (*fuseNode)(nil)
	_ fs.NodeGetattrer = (*fuseNode)(nil)
	_ fs.NodeSetattrer = (*fuseNode)(nil)
	_ fs.NodeReaddirer = (*fuseNode)(nil)
	_ fs.NodeMkdirer   = (*fuseNode)(nil)
	_ fs.NodeCreater   = (*fuseNode)(nil)
	_ fs.NodeUnlinker  = (*fuseNode)(nil)
	_ fs.NodeRmdirer   = (*fuseNode)(nil)
	_ fs.NodeRenamer   = (*fuseNode)(nil)
	_ fs.NodeOpener    = (*fuseNode)(nil)
	_ fs.NodeReader    = (*fuseNode)(nil)
	_ fs.NodeWriter    = (*fuseNode)(nil)
	_ fs.NodeFsyncer   = (*fuseNode)(nil)
	_ fs.NodeFlusher   = (*fuseNode)(nil)
	_ fs.NodeLinker    = (*fuseNode)(nil)
)

// child returns the go-fuse inode of c, a child of fn, with its attributes
// in out. f.mu must be held.
func (fn *fuseNode) child(ctx context.Context, c *node, out *fuse.EntryOut) *fs.Inode {
	c.attr(&out.Attr)
	return fn.NewInode(ctx, &fuseNode{tree: fn.tree, n: c}, fs.StableAttr{Mode: c.mode & syscall.S_IFMT, Ino: c.ino})
}

// attr fills a with n's attributes.
func (n *node) attr(a *fuse.Attr) {
	a.Ino, a.Mode, a.Nlink = n.ino, n.mode, 1
	a.Size = uint64(len(n.data))
	a.Blocks = (a.Size + 511) / 512
	a.Blksize = pageSize
	a.SetTimes(nil, &n.mtime, &n.mtime)
}

// Lookup finds name among the current entries.
func (fn *fuseNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	fn.tree.mu.Lock()
	defer fn.tree.mu.Unlock()
	c, ok := fn.n.entries[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	return fn.child(ctx, c, out), fs.OK
}

// Getattr reports the current size, mode and time.
func (fn *fuseNode) Getattr(_ context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fn.tree.mu.Lock()
	defer fn.tree.mu.Unlock()
	fn.n.attr(&out.Attr)
	return fs.OK
}

// Setattr changes size (an unsynced write, like any other), permission
// bits and modification time.
func (fn *fuseNode) Setattr(_ context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	fn.tree.mu.Lock()
	defer fn.tree.mu.Unlock()
	if errno := fn.tree.spend(); errno != fs.OK {
		return errno
	}
	if size, ok := in.GetSize(); ok {
		if fn.n.isDir() {
			return syscall.EISDIR
		}
		fn.n.truncate(int64(size))
	}
	if mode, ok := in.GetMode(); ok {
		fn.n.mode = fn.n.mode&syscall.S_IFMT | mode&^syscall.S_IFMT
	}
	if mtime, ok := in.GetMTime(); ok {
		fn.n.mtime = mtime
	}
	fn.n.attr(&out.Attr)
	return fs.OK
}

// Readdir lists the current entries, sorted.
func (fn *fuseNode) Readdir(context.Context) (fs.DirStream, syscall.Errno) {
	fn.tree.mu.Lock()
	defer fn.tree.mu.Unlock()
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range fn.n.entries {
			if !yield(name) {
				return
			}
		}
	})
	list := make([]fuse.DirEntry, 0, len(names))
	for _, name := range names {
		c := fn.n.entries[name]
		list = append(list, fuse.DirEntry{Name: name, Mode: c.mode, Ino: c.ino})
	}
	return fs.NewListDirStream(list), fs.OK
}

// Mkdir adds an empty directory; the entry is durable once fn is synced.
func (fn *fuseNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	fn.tree.mu.Lock()
	defer fn.tree.mu.Unlock()
	if errno := fn.tree.spend(); errno != fs.OK {
		return nil, errno
	}
	if _, ok := fn.n.entries[name]; ok {
		return nil, syscall.EEXIST
	}
	c := fn.tree.newNode(syscall.S_IFDIR | mode&0o7777)
	fn.n.entries[name] = c
	return fn.child(ctx, c, out), fs.OK
}

// Create adds an empty file, or opens the existing one (O_EXCL refuses it,
// O_TRUNC empties it).
func (fn *fuseNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	fn.tree.mu.Lock()
	defer fn.tree.mu.Unlock()
	if errno := fn.tree.spend(); errno != fs.OK {
		return nil, nil, 0, errno
	}
	c, ok := fn.n.entries[name]
	switch {
	case ok && flags&syscall.O_EXCL != 0:
		return nil, nil, 0, syscall.EEXIST
	case ok && c.isDir():
		return nil, nil, 0, syscall.EISDIR
	case ok && flags&syscall.O_TRUNC != 0:
		c.truncate(0)
	case !ok:
		c = fn.tree.newNode(syscall.S_IFREG | mode&0o7777)
		fn.n.entries[name] = c
	}
	return fn.child(ctx, c, out), nil, 0, fs.OK
}

// Unlink removes a file's entry; open descriptors keep working.
func (fn *fuseNode) Unlink(_ context.Context, name string) syscall.Errno {
	fn.tree.mu.Lock()
	defer fn.tree.mu.Unlock()
	if errno := fn.tree.spend(); errno != fs.OK {
		return errno
	}
	c, ok := fn.n.entries[name]
	switch {
	case !ok:
		return syscall.ENOENT
	case c.isDir():
		return syscall.EISDIR
	}
	delete(fn.n.entries, name)
	return fs.OK
}

// Rmdir removes an empty directory's entry.
func (fn *fuseNode) Rmdir(_ context.Context, name string) syscall.Errno {
	fn.tree.mu.Lock()
	defer fn.tree.mu.Unlock()
	if errno := fn.tree.spend(); errno != fs.OK {
		return errno
	}
	c, ok := fn.n.entries[name]
	switch {
	case !ok:
		return syscall.ENOENT
	case !c.isDir():
		return syscall.ENOTDIR
	case len(c.entries) > 0:
		return syscall.ENOTEMPTY
	}
	delete(fn.n.entries, name)
	return fs.OK
}

// Rename moves name to newParent/newName, replacing a file or an empty
// directory there (RENAME_NOREPLACE refuses to; RENAME_EXCHANGE is not
// supported). Each directory's change is durable once it is synced.
func (fn *fuseNode) Rename(_ context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	to, ok := newParent.(*fuseNode)
	if !ok || flags&^uint32(unix.RENAME_NOREPLACE) != 0 {
		return syscall.ENOTSUP
	}
	fn.tree.mu.Lock()
	defer fn.tree.mu.Unlock()
	if errno := fn.tree.spend(); errno != fs.OK {
		return errno
	}
	c, ok := fn.n.entries[name]
	if !ok {
		return syscall.ENOENT
	}
	if errno := replaceable(c, to.n.entries[newName], flags); errno != fs.OK {
		return errno
	}
	delete(fn.n.entries, name)
	to.n.entries[newName] = c
	return fs.OK
}

// replaceable says whether src may be renamed over dst (nil: no entry).
func replaceable(src, dst *node, flags uint32) syscall.Errno {
	switch {
	case dst == nil || dst == src:
		return fs.OK
	case flags&uint32(unix.RENAME_NOREPLACE) != 0:
		return syscall.EEXIST
	case dst.isDir() && !src.isDir():
		return syscall.EISDIR
	case !dst.isDir() && src.isDir():
		return syscall.ENOTDIR
	case dst.isDir() && len(dst.entries) > 0:
		return syscall.ENOTEMPTY
	}
	return fs.OK
}

// Open opens the node without a handle of its own. No FOPEN_DIRECT_IO (mmap
// must work) and no FOPEN_KEEP_CACHE: every open starts from the FS's pages.
func (fn *fuseNode) Open(_ context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_TRUNC == 0 {
		return nil, 0, fs.OK
	}
	fn.tree.mu.Lock()
	defer fn.tree.mu.Unlock()
	if errno := fn.tree.spend(); errno != fs.OK {
		return nil, 0, errno
	}
	fn.n.truncate(0)
	return nil, 0, fs.OK
}

// Read returns the current content at off.
func (fn *fuseNode) Read(_ context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	fn.tree.mu.Lock()
	defer fn.tree.mu.Unlock()
	if off >= int64(len(fn.n.data)) {
		return fuse.ReadResultData(nil), fs.OK
	}
	n := copy(dest, fn.n.data[off:])
	return fuse.ReadResultData(dest[:n]), fs.OK
}

// Write changes the current content at off; it is durable once synced.
func (fn *fuseNode) Write(_ context.Context, _ fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	fn.tree.mu.Lock()
	defer fn.tree.mu.Unlock()
	if errno := fn.tree.spend(); errno != fs.OK {
		return 0, errno
	}
	fn.n.writeAt(data, off)
	return uint32(len(data)), fs.OK
}

// Fsync makes the node's current state durable: a file's content (fsync
// and fdatasync alike), a directory's entries.
func (fn *fuseNode) Fsync(context.Context, fs.FileHandle, uint32) syscall.Errno {
	fn.tree.mu.Lock()
	defer fn.tree.mu.Unlock()
	if errno := fn.tree.spend(); errno != fs.OK {
		return errno
	}
	fn.n.sync()
	return fs.OK
}

// Flush (close(2)) makes nothing durable, as on a real disk.
func (fn *fuseNode) Flush(context.Context, fs.FileHandle) syscall.Errno { return fs.OK }

// Link adds name for the file target (link(2)); the entry is durable once
// fn is synced. Link counts are not kept: stat reports 1.
func (fn *fuseNode) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*fuseNode)
	if !ok {
		return nil, syscall.EXDEV
	}
	fn.tree.mu.Lock()
	defer fn.tree.mu.Unlock()
	if errno := fn.tree.spend(); errno != fs.OK {
		return nil, errno
	}
	switch _, exists := fn.n.entries[name]; {
	case exists:
		return nil, syscall.EEXIST
	case t.n.isDir():
		return nil, syscall.EPERM
	}
	fn.n.entries[name] = t.n
	return fn.child(ctx, t.n, out), fs.OK
}
