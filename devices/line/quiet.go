package line

import (
	"sync"
	"time"

	"github.com/fencegate/fencegate/transport/serial"
)

// watched is a serial.Decoder that records when bytes last arrived, so
// that settle waits for a line that carries no byte, not merely no
// complete line: a late reply still trickling in would otherwise be cut by
// the flush before the next request, and its tail taken for that
// request's answer. Feed and Reset are called by the Link's reader;
// lastInput from the driver's goroutine.
type watched struct {
	serial.Decoder
	mu   sync.Mutex // guards last
	last time.Time
}

// Feed implements serial.Decoder.
func (w *watched) Feed(b []byte, emit func(serial.Msg)) {
	w.mu.Lock()
	w.last = time.Now()
	w.mu.Unlock()
	w.Decoder.Feed(b, emit)
}

// lastInput is when bytes last arrived (zero before any).
func (w *watched) lastInput() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}
