package simfirmware

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/fencegate/fencegate/devices/frame"
	"github.com/fencegate/fencegate/transport/serial"
)

// cacheLen is how many replies the firmware keeps to answer a repeated
// command id without applying it again.
const cacheLen = 16

// faults are injected into the next reply.
type faults struct {
	delay               time.Duration
	drop, garble, noise bool
}

// firmware is the simulated device. Its serve goroutine handles requests
// one at a time, like a single-threaded firmware main loop; the control
// goroutine injects faults and reboots it.
type firmware struct {
	o      options
	outMu  sync.Mutex // guards out and quiet
	out    io.Writer  // control replies and "ready" lines
	quiet  bool       // set by shutdown: nothing more is written to out
	served sync.WaitGroup

	mu       sync.Mutex // guards the fields below
	stopped  bool       // set by shutdown: the firmware never boots again
	log      *applyLog  // nil without --log; closed by shutdown
	wire     wire       // nil while rebooting
	fences   map[string]fenceRec
	values   map[string]json.RawMessage // volatile: lost on reboot
	cache    map[string][]byte          // encoded replies by command id; volatile
	order    []string                   // cache ids, oldest first
	next     faults
	applied  int
	requests int
	bad      int
	busy     bool // handling a request (holding, delaying or replying)
}

// newFirmware is an unplugged firmware with the fences of o.state, its
// apply log open if o.log is set, writing its control output to out.
func newFirmware(o options, out io.Writer) (*firmware, error) {
	fences, err := loadFences(o.state)
	if err != nil {
		return nil, err
	}
	log, err := openApplyLog(o.log, o.device)
	if err != nil {
		return nil, err
	}
	return &firmware{o: o, out: out, log: log, fences: fences, values: map[string]json.RawMessage{},
		cache: map[string][]byte{}}, nil
}

// say writes one line to the control output, unless the firmware is shut
// down.
func (fw *firmware) say(format string, args ...any) {
	fw.outMu.Lock()
	defer fw.outMu.Unlock()
	if !fw.quiet {
		fmt.Fprintf(fw.out, format+"\n", args...)
	}
}

// boot opens the wire and starts serving it.
func (fw *firmware) boot() error {
	var w wire
	var err error
	if fw.o.link != "" {
		w, err = openPTY(fw.o.link)
	} else {
		w, err = openPort(fw.o.port, fw.o.baud)
	}
	if err != nil {
		return err
	}
	fw.mu.Lock()
	if fw.stopped {
		fw.mu.Unlock()
		w.Close()
		return errStopped
	}
	fw.wire = w
	fw.served.Add(1) // under mu, so that shutdown's Wait sees it
	fw.mu.Unlock()
	go fw.serve(w)
	fw.say("ready %s", w.Node())
	return nil
}

// unplug closes the wire and forgets volatile state, as a power cycle does;
// the fences (in the state file) survive.
func (fw *firmware) unplug() {
	fw.mu.Lock()
	w := fw.wire
	fw.wire = nil
	fw.values, fw.cache, fw.order, fw.next = map[string]json.RawMessage{}, map[string][]byte{}, nil, faults{}
	fw.mu.Unlock()
	if w != nil {
		w.Close()
	}
	fw.served.Wait()
}

// shutdown unplugs the firmware for good: it stops writing control
// output, never boots again, and closes its apply log once no request is
// being handled.
func (fw *firmware) shutdown() {
	fw.outMu.Lock()
	fw.quiet = true
	fw.outMu.Unlock()
	fw.mu.Lock()
	fw.stopped = true
	fw.mu.Unlock()
	fw.unplug()
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.log.close()
	fw.log = nil
}

// isStopped reports whether shutdown has begun.
func (fw *firmware) isStopped() bool {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.stopped
}

// serve reads requests from w and answers them until w fails.
func (fw *firmware) serve(w wire) {
	defer fw.served.Done()
	var dec serial.Decoder = serial.NewFrameDecoder(frame.MaxEncoded)
	handle := fw.handleFrame
	if fw.o.protocol == "line" {
		dec, handle = serial.NewLineDecoder(1024), fw.handleLine
	}
	buf := make([]byte, 4096)
	for {
		n, err := w.Read(buf)
		if err != nil {
			return
		}
		var msgs []serial.Msg
		dec.Feed(buf[:n], func(m serial.Msg) { msgs = append(msgs, m) })
		for _, m := range msgs {
			fw.setBusy(true)
			reply, hold := handle(m)
			time.Sleep(hold)
			fw.send(w, reply)
			fw.setBusy(false)
		}
	}
}

func (fw *firmware) setBusy(b bool) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.busy = b
}

// send writes reply with the pending faults applied.
func (fw *firmware) send(w wire, reply []byte) {
	if reply == nil {
		return
	}
	fw.mu.Lock()
	f := fw.next
	fw.next = faults{}
	fw.mu.Unlock()
	time.Sleep(f.delay)
	if f.drop {
		return
	}
	if f.garble {
		reply = garble(reply)
	}
	if f.noise {
		pre, post := fw.noise()
		reply = append(append(pre, reply...), post...)
	}
	w.Write(reply)
}

// noise is garbage and a half message to put around a reply.
func (fw *firmware) noise() (pre, post []byte) {
	if fw.o.protocol == "line" {
		return []byte("\x15\x7f#garbage\r\n"), []byte("HALF")
	}
	half := serial.EncodeFrame([]byte("half a frame"))
	return append([]byte("\xde\xad\xbe\xef\x00\x13\x37"), half[:len(half)/2]...), nil
}

// garble flips bits in the middle of reply, keeping delimiters.
func garble(reply []byte) []byte {
	b := append([]byte(nil), reply...)
	i := len(b) / 2
	if b[i] ^= 0x5A; b[i] == 0 || b[i] == '\n' {
		b[i] = 0x01
	}
	if len(b) > 2 {
		b[1] ^= 0x80 // a control byte in a line (0x80 flips ASCII to non-ASCII) or a bad COBS code
		if b[1] == 0 {
			b[1] = 0x01
		}
	}
	return b
}

// remember caches an encoded reply under id.
func (fw *firmware) rememberLocked(id string, reply []byte) {
	if _, ok := fw.cache[id]; !ok {
		fw.order = append(fw.order, id)
	}
	fw.cache[id] = reply
	if len(fw.order) > cacheLen {
		delete(fw.cache, fw.order[0])
		fw.order = fw.order[1:]
	}
}

var (
	errNoWire  = errors.New("not plugged in")
	errStopped = errors.New("shut down")
)
