package simmodbus

import (
	"errors"
	"io"
	"log"
	"path/filepath"
	"testing"
	"time"

	mb "github.com/simonvetter/modbus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newPLC is a PLC closed at the test's end.
func newPLC(t *testing.T, cfg Config) *PLC {
	t.Helper()
	p, err := NewPLC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// rtuClient serves p over RTU on a pseudo-terminal and returns the
// library's RTU client on it: an implementation of the framing that is
// not ours.
func rtuClient(t *testing.T, p *PLC) (*mb.ModbusClient, *RTUServer) {
	t.Helper()
	s, err := ServeRTU(p, filepath.Join(t.TempDir(), "plc"))
	if err != nil {
		t.Skipf("pseudo-terminals unavailable: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := mb.NewClient(&mb.ClientConfiguration{URL: "rtu://" + s.link, Speed: 19200, Timeout: 300 * time.Millisecond,
		Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, s
}

func tcpClient(t *testing.T, p *PLC) *mb.ModbusClient {
	t.Helper()
	s, err := ServeTCP(p, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := mb.NewClient(&mb.ClientConfiguration{URL: "tcp://" + s.Addr(), Timeout: 2 * time.Second, Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTablesThroughLibraryClients: the library's RTU client (against our
// RTU server) and its TCP client (against its own server) read and write
// every table with every function code, and get the exceptions the PLC
// gives.
func TestTablesThroughLibraryClients(t *testing.T) {
	for _, tr := range []string{"rtu", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			p := newPLC(t, Config{Size: 200, Protected: []Range{{Start: 150, Count: 10}}})
			var c *mb.ModbusClient
			if tr == "rtu" {
				c, _ = rtuClient(t, p)
			} else {
				c = tcpClient(t, p)
			}
			exerciseTables(t, c, p)
		})
	}
}

func exerciseTables(t *testing.T, c *mb.ModbusClient, p *PLC) {
	t.Helper()
	must(t, c.WriteRegister(10, 0xBEEF))                 // FC 06
	must(t, c.WriteRegisters(20, []uint16{1, 2, 3}))     // FC 16
	must(t, c.WriteCoil(5, true))                        // FC 05
	must(t, c.WriteCoils(30, []bool{true, false, true})) // FC 15
	p.SetInput(40, 7, 8)
	p.SetDiscrete(50, true, true)
	if got, err := c.ReadRegisters(10, 1, mb.HOLDING_REGISTER); err != nil || got[0] != 0xBEEF {
		t.Fatalf("holding 10 = %v, %v", got, err)
	}
	if got, err := c.ReadRegisters(20, 3, mb.HOLDING_REGISTER); err != nil || got[2] != 3 {
		t.Fatalf("holding 20..22 = %v, %v", got, err)
	}
	if got, err := c.ReadRegisters(40, 2, mb.INPUT_REGISTER); err != nil || got[1] != 8 {
		t.Fatalf("input 40..41 = %v, %v", got, err)
	}
	if got, err := c.ReadCoils(30, 3); err != nil || !got[0] || got[1] || !got[2] {
		t.Fatalf("coils 30..32 = %v, %v", got, err)
	}
	if got, err := c.ReadDiscreteInputs(50, 2); err != nil || !got[1] {
		t.Fatalf("discrete 50..51 = %v, %v", got, err)
	}
	if err := c.WriteRegister(155, 1); !errors.Is(err, mb.ErrIllegalDataAddress) {
		t.Fatalf("write to a protected register: %v, want illegal data address", err)
	}
	if _, err := c.ReadRegisters(199, 2, mb.HOLDING_REGISTER); !errors.Is(err, mb.ErrIllegalDataAddress) {
		t.Fatalf("read past the table: %v, want illegal data address", err)
	}
	if !p.Coil(5) || p.Holding(21, 1)[0] != 2 {
		t.Fatal("the writes did not reach the tables")
	}
	if n := len(p.Log()); n != 4 {
		t.Fatalf("%d writes logged, want the 4 applied", n)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestExceptionFence: a write carrying a fence below the highest is
// refused whole (values beside it untouched), one at or above it raises
// the highest, a write of part of the block is refused, and the highest
// survives a restart through the state file.
func TestExceptionFence(t *testing.T) {
	state := filepath.Join(t.TempDir(), "fence")
	cfg := Config{Fence: &Fence{Address: 100}, StateFile: state}
	p := newPLC(t, cfg)
	c := tcpClient(t, p)
	must(t, c.WriteRegisters(100, []uint16{0, 0, 0, 7, 42})) // seq 7, value 42 at 104
	err := c.WriteRegisters(100, []uint16{0, 0, 0, 6, 99})
	if !errors.Is(err, mb.ErrIllegalDataValue) {
		t.Fatalf("stale fence: %v, want the refusal exception", err)
	}
	if v := p.Holding(104, 1)[0]; v != 42 {
		t.Fatalf("value beside a refused fence is %d, want 42 (untouched)", v)
	}
	if err := c.WriteRegisters(102, []uint16{9, 9}); !errors.Is(err, mb.ErrIllegalDataValue) {
		t.Fatalf("partial fence write: %v, want refused", err)
	}
	must(t, c.WriteRegisters(100, []uint16{0, 0, 0, 7, 43})) // same position: the same lease
	if st := p.Stats(); st.Stale != 1 || st.FenceWords[3] != 7 {
		t.Fatalf("stats %+v, want one stale refusal and highest seq 7", st)
	}
	p2 := newPLC(t, cfg)
	if got := p2.Holding(100, 4); got[3] != 7 {
		t.Fatalf("after a restart the fence block reads %v, want seq 7 kept", got)
	}
}

// TestStatusFence: in status mode the scan judges a pending fence: at or
// above the highest it is taken (status 1), below it is refused (status 2)
// and the block shows the highest again.
func TestStatusFence(t *testing.T) {
	p := newPLC(t, Config{Fence: &Fence{Address: 100, Words: 8, Status: true, Scan: time.Millisecond}})
	c := tcpClient(t, p)
	judge := func(seq uint16) uint16 {
		t.Helper()
		must(t, c.WriteRegisters(100, []uint16{0, 0, 0, 1, 0, 0, 0, seq, 0}))
		for {
			st, err := c.ReadRegister(108, mb.HOLDING_REGISTER)
			must(t, err)
			if st != 0 {
				return st
			}
			time.Sleep(time.Millisecond)
		}
	}
	if st := judge(5); st != 1 {
		t.Fatalf("first fence: status %d, want 1", st)
	}
	if st := judge(4); st != 2 {
		t.Fatalf("older fence: status %d, want 2", st)
	}
	if got := p.Holding(100, 8); got[7] != 5 {
		t.Fatalf("block after a refusal reads %v, want the highest (seq 5)", got)
	}
	if st := judge(6); st != 1 {
		t.Fatalf("newer fence: status %d, want 1", st)
	}
}

// TestRTUFaults: faults as the library's RTU client sees them: no
// response (timeout), a bad CRC, an exception; noise before a response
// does not stop it from being read.
func TestRTUFaults(t *testing.T) {
	p := newPLC(t, Config{})
	c, _ := rtuClient(t, p)
	p.Inject(Fault{Drop: true})
	if err := c.WriteRegister(1, 1); !errors.Is(err, mb.ErrRequestTimedOut) {
		t.Fatalf("dropped response: %v, want a timeout", err)
	}
	if p.Holding(1, 1)[0] != 1 {
		t.Fatal("a dropped response's request was not applied")
	}
	p.Inject(Fault{Garble: true})
	if err := c.WriteRegister(2, 2); !errors.Is(err, mb.ErrBadCRC) {
		t.Fatalf("garbled response: %v, want bad crc", err)
	}
	p.Inject(Fault{Exception: 6})
	if err := c.WriteRegister(3, 3); !errors.Is(err, mb.ErrServerDeviceBusy) {
		t.Fatalf("exception 6: %v, want server device busy", err)
	}
	if p.Holding(3, 1)[0] != 0 {
		t.Fatal("a request answered with an injected exception was applied")
	}
}

// TestUnplugRemovesLink: unplugging removes the link; plugging brings a
// new terminal at the same link, served again.
func TestUnplugRemovesLink(t *testing.T) {
	p := newPLC(t, Config{})
	c, s := rtuClient(t, p)
	old := s.Node()
	s.Unplug()
	if _, err := filepath.EvalSymlinks(s.link); err == nil {
		t.Fatal("the link still leads somewhere after unplug")
	}
	must(t, s.Plug())
	c.Close()
	must(t, c.Open())
	if s.Node() == old {
		t.Logf("the new terminal got the old number %s (allowed)", old)
	}
	must(t, c.WriteRegister(1, 9))
}
