package simmodbus

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// control reads control lines from in, one per line, and answers each,
// until in ends.
func (s *sim) control(in io.Reader) {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		out, err := s.command(f)
		switch {
		case err != nil:
			s.say("error %v", err)
		case out != "":
			s.say("ok %s", out)
		default:
			s.say("ok")
		}
	}
}

// command runs one control line: its output (JSON, or empty) or an error.
func (s *sim) command(f []string) (string, error) {
	switch f[0] {
	case "drop", "lose", "garble", "noise":
		s.p.Inject(Fault{Drop: f[0] == "drop", Lose: f[0] == "lose", Garble: f[0] == "garble", Noise: f[0] == "noise"})
	case "late", "latency":
		return "", s.timed(f)
	case "exception":
		n, err := arg(f, 1, 1, 255)
		if err != nil {
			return "", err
		}
		s.p.Inject(Fault{Exception: byte(n)})
	case "unplug", "plug":
		return "", s.plug(f[0] == "plug")
	case "stats":
		b, _ := json.Marshal(s.p.Stats())
		return string(b), nil
	case "get":
		return s.get(f)
	case "set":
		return "", s.set(f)
	default:
		return "", fmt.Errorf("unknown command %q", f[0])
	}
	return "", nil
}

func (s *sim) timed(f []string) error {
	if len(f) != 2 {
		return fmt.Errorf("%s takes a duration", f[0])
	}
	d, err := time.ParseDuration(f[1])
	if err != nil || d < 0 {
		return fmt.Errorf("%s %q: want a duration ≥ 0", f[0], f[1])
	}
	if f[0] == "late" {
		s.p.Inject(Fault{Late: d})
	} else {
		s.p.SetLatency(d)
	}
	return nil
}

func (s *sim) plug(in bool) error {
	if s.rtu == nil {
		return fmt.Errorf("no RTU line to unplug")
	}
	if !in {
		s.rtu.Unplug()
		return nil
	}
	if err := s.rtu.Plug(); err != nil {
		return err
	}
	s.say("ready rtu %s", s.rtu.Node())
	return nil
}

// arg parses f[i] as an integer in lo..hi.
func arg(f []string, i, lo, hi int) (int, error) {
	if len(f) <= i {
		return 0, fmt.Errorf("%s: missing argument %d", f[0], i)
	}
	n, err := strconv.Atoi(f[i])
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s: %q is not in %d..%d", f[0], f[i], lo, hi)
	}
	return n, nil
}

// get: "get holding|input|coil|discrete ADDR COUNT" → a JSON array.
func (s *sim) get(f []string) (string, error) {
	addr, err := arg(f, 2, 0, s.p.cfg.Size-1)
	if err != nil {
		return "", err
	}
	n, err := arg(f, 3, 1, s.p.cfg.Size-addr)
	if err != nil {
		return "", err
	}
	var v any
	switch f[1] {
	case "holding", "input":
		v, err = s.p.readRegs(addr, n, f[1] == "input")
	case "coil", "discrete":
		v, err = s.p.readBits(addr, n, f[1] == "discrete")
	default:
		return "", fmt.Errorf("get: table %q: want holding, input, coil or discrete", f[1])
	}
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(v)
	return string(b), nil
}

// set: "set holding|input|coil|discrete ADDR V…" as the PLC program would
// (no fence check, not in the log); bits as 0 or 1.
func (s *sim) set(f []string) error {
	addr, err := arg(f, 2, 0, s.p.cfg.Size-1)
	if err != nil {
		return err
	}
	if len(f) < 4 || addr+len(f)-3 > s.p.cfg.Size {
		return fmt.Errorf("set: want a table, an address and values within the table")
	}
	vals := make([]uint16, 0, len(f)-3)
	for i := 3; i < len(f); i++ {
		v, err := arg(f, i, 0, 65535)
		if err != nil {
			return err
		}
		vals = append(vals, uint16(v))
	}
	return s.p.setTable(f[1], addr, vals)
}

// setTable sets values of any table by name; bits are nonzero words.
func (p *PLC) setTable(table string, addr int, v []uint16) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch table {
	case "holding":
		copy(p.holding[addr:], v)
	case "input":
		copy(p.input[addr:], v)
	case "coil", "discrete":
		t := p.coils
		if table == "discrete" {
			t = p.discrete
		}
		for i, w := range v {
			t[addr+i] = w != 0
		}
	default:
		return fmt.Errorf("set: table %q: want holding, input, coil or discrete", table)
	}
	return nil
}
