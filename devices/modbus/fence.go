package modbus

import (
	"fmt"

	"github.com/fencegate/fencegate/fence"
)

// Fence status register values (FenceConfig.Status): the driver writes
// StatusPending with the fence; the PLC program answers with one of the
// others.
const (
	StatusPending  uint16 = 0
	StatusAccepted uint16 = 1
	StatusStale    uint16 = 2
)

// FenceWords returns the fence block for a token position in layout: four
// words of the 64-bit seq (LayoutSeq), or four of the epoch then four of
// the seq (LayoutEpochSeq); each number most significant word first, so a
// PLC that compares the block word by word, as unsigned 16-bit numbers
// from the first register on, orders blocks as the positions they hold.
func FenceWords(layout string, epoch, seq uint64) []uint16 {
	if layout == LayoutEpochSeq {
		return append(words64(epoch), words64(seq)...)
	}
	return words64(seq)
}

// ParseFenceWords is FenceWords' inverse (epoch 0 for LayoutSeq); w holds
// the layout's number of words.
func ParseFenceWords(layout string, w []uint16) (epoch, seq uint64) {
	if layout == LayoutEpochSeq {
		return join64(w[:4]), join64(w[4:8])
	}
	return 0, join64(w[:4])
}

func words64(v uint64) []uint16 {
	return []uint16{uint16(v >> 48), uint16(v >> 32), uint16(v >> 16), uint16(v)}
}

func join64(w []uint16) uint64 {
	return uint64(w[0])<<48 | uint64(w[1])<<32 | uint64(w[2])<<16 | uint64(w[3])
}

// CompareFenceWords orders two fence blocks as the PLC does: word by word,
// unsigned, first register first (-1, 0, +1).
func CompareFenceWords(a, b []uint16) int {
	for i := range min(len(a), len(b)) {
		switch {
		case a[i] < b[i]:
			return -1
		case a[i] > b[i]:
			return 1
		}
	}
	return 0
}

// block is the words the driver writes for tok: the fence block, and a
// pending status when the PLC answers through a status register.
func (f *fenceSpec) block(tok fence.Token) []uint16 {
	w := FenceWords(f.Layout, tok.Epoch, tok.Seq)
	if f.status != nil {
		w = append(w, StatusPending)
	}
	return w
}

// plcFence is the PLC's fence as read back from the block.
type plcFence struct {
	words []uint16
	f     *fenceSpec
}

// newerThan reports whether the PLC's fence is above tok's position.
func (p plcFence) newerThan(tok fence.Token) bool {
	return CompareFenceWords(p.words, FenceWords(p.f.Layout, tok.Epoch, tok.Seq)) > 0
}

// fence is the PLC's fence in the result's form; the PLC knows no holder,
// and in LayoutSeq no epoch.
func (p plcFence) fence() fence.Fence {
	e, s := ParseFenceWords(p.f.Layout, p.words)
	return fence.Fence{Epoch: e, Seq: s}
}

func (p plcFence) String() string {
	e, s := ParseFenceWords(p.f.Layout, p.words)
	if p.f.Layout == LayoutSeq {
		return fmt.Sprintf("seq %d", s)
	}
	return fmt.Sprintf("epoch %d seq %d", e, s)
}
