package groupcommit

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/internal/atomicfile"
)

// A Log is the write-ahead log of a logged Committer: one preallocated file
// beside the bbolt file, overwritten from its start after every checkpoint.
//
// A batch is durable once its record — every write of the batch, in order —
// is written to the log and fdatasynced: one sequential write and one flush
// however many pages the batch dirties. The batches themselves stay in one
// open bbolt transaction, which readers see, until a checkpoint commits it
// (bbolt's own two flushes) and the log starts over.
//
// Each record carries the log's identity (a random id kept in the bbolt
// file) and a generation: a random number drawn afresh at every checkpoint
// and every open, never a counter. The bbolt file holds the generation of
// the records that are not yet in it, stored in the same commit that writes
// the batches before them, so after a power cut open replays exactly the
// records of that generation, in order, from the start of the file up to the
// first record that is torn, foreign (another store's, or another
// generation's) or out of sequence. A copy of the bbolt file taken at a
// checkpoint (Committer.Snapshot) shares its generation with the records
// written right after the copy and with no others: restored beside the live
// log, it replays at most those, the exact continuation of itself, and then
// draws a generation of its own, which no record of the lost timeline can
// carry. (A counter would not do: the restored copy would count up to
// numbers the lost timeline already wrote records under.)
//
// Record: payload length u32, CRC-32C u32 (of everything after it), log id
// u64, generation u64, sequence u64 (0, 1, … within a generation), payload
// (the batch's writes; see recorder). Integers are big-endian.
type Log struct {
	f    *os.File
	path string
	size int64 // preallocated length; a checkpoint starts over before a record would pass it

	id, gen, seq uint64
	next         uint64 // the generation stored for after the next checkpoint
	off          int64
	buf          []byte
}

// DefaultLogSize is the preallocated length of a log file: how many bytes
// of batches the open transaction takes before a checkpoint. Larger means
// fewer checkpoints, each holding up every write and view longer while
// bbolt writes the pages the batches dirtied, and a larger open
// transaction in memory (every value written since the last checkpoint).
// It also sets how much free space the file needs: a checkpoint cannot
// reuse the pages it frees, so a store whose batches touch pages all over
// the file grows by what one checkpoint dirties. The fence store, whose
// journal is such a store, uses a smaller log (persist's logSize).
const DefaultLogSize = 16 << 20

const recordHeader = 32

var (
	bucketLog = []byte("groupcommit-log")
	keyLogID  = []byte("id")
	keyLogGen = []byte("generation")
	crcTable  = crc32.MakeTable(crc32.Castagnoli)

	// ErrLogCorrupt: a log record that is whole and belongs to the store
	// does not apply to it.
	ErrLogCorrupt = errors.New("groupcommit: log record does not apply")
	errLogFull    = errors.New("groupcommit: log full")
)

// OpenLog opens (or creates, mode 0600) the log at path for db, replays
// into db every batch the log holds that db does not (a power cut or crash
// since the last checkpoint), and starts a new generation. It must be
// called before anything reads db, and its Log handed to one Committer.
// size is the file's preallocated length (0: DefaultLogSize).
func OpenLog(db *bolt.DB, path string, size int64) (*Log, error) {
	if size <= 0 {
		size = DefaultLogSize
	}
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	l := &Log{f: f, path: path, size: size}
	if err := l.recover(db); err != nil {
		f.Close()
		return nil, err
	}
	l.checkpointed()
	if err := l.preallocate(); err != nil {
		f.Close()
		return nil, err
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, err
		}
	}
	return l, nil
}

// recover replays the current generation's records and commits the next
// generation, in one bbolt transaction.
func (l *Log) recover(db *bolt.DB) error {
	st, err := l.f.Stat()
	if err != nil {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketLog)
		if err != nil {
			return err
		}
		if id := meta.Get(keyLogID); len(id) == 8 {
			l.id = binary.BigEndian.Uint64(id)
			l.gen = binary.BigEndian.Uint64(meta.Get(keyLogGen))
			if err := replay(tx, l.f, st.Size(), l.id, l.gen); err != nil {
				return fmt.Errorf("replay %s: %w", l.path, err)
			}
		} else if l.id, err = randomID(); err != nil {
			return err
		}
		return l.putNextGeneration(tx)
	})
}

// putNextGeneration draws a new generation and stores it in tx: the
// records written after tx commits carry it; checkpointed moves l to it
// once tx has committed.
func (l *Log) putNextGeneration(tx *bolt.Tx) error {
	next, err := randomID()
	if err != nil {
		return err
	}
	meta := tx.Bucket(bucketLog)
	if err := meta.Put(keyLogID, binary.BigEndian.AppendUint64(nil, l.id)); err != nil {
		return err
	}
	if err := meta.Put(keyLogGen, binary.BigEndian.AppendUint64(nil, next)); err != nil {
		return err
	}
	l.next = next
	return nil
}

// checkpointed starts the generation putNextGeneration stored: the next
// record goes to the start of the file.
func (l *Log) checkpointed() { l.gen, l.seq, l.off = l.next, 0, 0 }

// randomID returns 64 random bits (crypto/rand: never repeated in practice).
func randomID() (uint64, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(b[:]), nil
}

// replay applies, in order, the records of generation gen of log id found
// from the start of the file (size bytes), stopping at the first that is
// not one. It reads record by record, so it holds the records it applies
// (bbolt keeps the slices until tx commits), not the stale rest of the file.
func replay(tx *bolt.Tx, f io.ReaderAt, size int64, id, gen uint64) error {
	hdr := make([]byte, recordHeader)
	var off int64
	for seq := uint64(0); off+recordHeader <= size; seq++ {
		if _, err := f.ReadAt(hdr, off); err != nil {
			return err
		}
		length := int64(binary.BigEndian.Uint32(hdr))
		if length > size-off-recordHeader {
			return nil
		}
		rec := make([]byte, recordHeader+length)
		if _, err := f.ReadAt(rec, off); err != nil {
			return err
		}
		payload, n := parseRecord(rec, id, gen, seq)
		if n == 0 {
			return nil
		}
		if err := applyWrites(tx, payload); err != nil {
			return fmt.Errorf("%w: record %d: %w", ErrLogCorrupt, seq, err)
		}
		off += int64(n)
	}
	return nil
}

// parseRecord returns the payload of the record at the start of data and
// its length, or n == 0 if data does not start with record seq of
// generation gen of log id, whole.
func parseRecord(data []byte, id, gen, seq uint64) (payload []byte, n int) {
	if len(data) < recordHeader {
		return nil, 0
	}
	length := int64(binary.BigEndian.Uint32(data[0:]))
	if length > int64(len(data)-recordHeader) {
		return nil, 0
	}
	end := recordHeader + int(length)
	if crc32.Checksum(data[8:end], crcTable) != binary.BigEndian.Uint32(data[4:]) {
		return nil, 0
	}
	if binary.BigEndian.Uint64(data[8:]) != id || binary.BigEndian.Uint64(data[16:]) != gen || binary.BigEndian.Uint64(data[24:]) != seq {
		return nil, 0
	}
	return data[recordHeader:end], end
}

// preallocate writes zeros up to l.size, so that a record overwrites
// allocated blocks and its fdatasync has no file size to flush.
func (l *Log) preallocate() error {
	st, err := l.f.Stat()
	if err != nil {
		return err
	}
	if st.Size() >= l.size {
		return nil
	}
	zeros := make([]byte, 1<<20)
	for off := st.Size(); off < l.size; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), l.size-off)
		if _, err := l.f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
	}
	return l.f.Sync()
}

// append writes payload as the next record and, if sync, fdatasyncs it
// (unsynced only where bbolt is told not to sync either: a mutation
// build of the power-loss tests). It returns
// errLogFull, writing nothing, if the record would pass the preallocated
// length and is not the generation's first.
func (l *Log) append(payload []byte, sync bool) error {
	n := int64(recordHeader + len(payload))
	if l.off > 0 && l.off+n > l.size {
		return errLogFull
	}
	l.buf = binary.BigEndian.AppendUint32(l.buf[:0], uint32(len(payload)))
	l.buf = append(l.buf, 0, 0, 0, 0)
	l.buf = binary.BigEndian.AppendUint64(l.buf, l.id)
	l.buf = binary.BigEndian.AppendUint64(l.buf, l.gen)
	l.buf = binary.BigEndian.AppendUint64(l.buf, l.seq)
	l.buf = append(l.buf, payload...)
	binary.BigEndian.PutUint32(l.buf[4:], crc32.Checksum(l.buf[8:], crcTable))
	if _, err := l.f.WriteAt(l.buf, l.off); err != nil {
		return fmt.Errorf("log write: %w", err)
	}
	if sync {
		if err := fdatasync(l.f); err != nil {
			return fmt.Errorf("log sync: %w", err)
		}
	}
	l.off += n
	l.seq++
	return nil
}

// Close closes the log file.
func (l *Log) Close() error { return l.f.Close() }
