package simfirmware

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// control reads fault-injection commands from in, one per line, and
// answers each on the control output, until in ends; after shutdown it
// ignores what it reads.
func (fw *firmware) control(in io.Reader) {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || fw.isStopped() {
			continue
		}
		if err := fw.command(f); err != nil {
			fw.say("error %v", err)
		}
	}
}

// command runs one control command and answers it (unless it fails).
func (fw *firmware) command(f []string) error {
	switch f[0] {
	case "delay":
		return fw.delay(f)
	case "drop", "garble", "noise":
		fw.inject(func(n *faults) {
			n.drop, n.garble, n.noise = n.drop || f[0] == "drop", n.garble || f[0] == "garble", n.noise || f[0] == "noise"
		})
	case "junk":
		return fw.junk()
	case "stall", "resume":
		return fw.flow(f[0] == "stall")
	case "reboot":
		return fw.reboot(f)
	case "unplug":
		fw.unplug()
	case "plug":
		if err := fw.plug(); err != nil {
			return err
		}
	case "stats":
		fw.say("ok %s", fw.stats())
		return nil
	default:
		return fmt.Errorf("unknown command %q", f[0])
	}
	fw.say("ok")
	return nil
}

func (fw *firmware) inject(change func(*faults)) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	change(&fw.next)
}

func (fw *firmware) delay(f []string) error {
	if len(f) != 2 {
		return fmt.Errorf("usage: delay <duration>")
	}
	d, err := time.ParseDuration(f[1])
	if err != nil {
		return err
	}
	fw.inject(func(n *faults) { n.delay = d })
	fw.say("ok")
	return nil
}

// junk writes garbage and a half message on the line now.
func (fw *firmware) junk() error {
	fw.mu.Lock()
	w := fw.wire
	fw.mu.Unlock()
	if w == nil {
		return errNoWire
	}
	pre, _ := fw.noise()
	if _, err := w.Write(pre); err != nil {
		return err
	}
	fw.say("ok")
	return nil
}

// flow stalls the line toward the firmware or resumes it.
func (fw *firmware) flow(stall bool) error {
	fw.mu.Lock()
	w := fw.wire
	fw.mu.Unlock()
	if w == nil {
		return errNoWire
	}
	if stall {
		if err := w.Stall(); err != nil {
			return err
		}
	} else {
		w.Resume()
	}
	fw.say("ok")
	return nil
}

// reboot unplugs the firmware now and plugs it in again after the given
// duration, on a new pseudo-terminal; "ready <node>" follows.
func (fw *firmware) reboot(f []string) error {
	down := time.Duration(0)
	if len(f) == 2 {
		var err error
		if down, err = time.ParseDuration(f[1]); err != nil {
			return err
		}
	}
	fw.unplug()
	fw.say("ok")
	time.Sleep(down)
	return fw.boot()
}

// stats is the firmware's counters, fences and values as JSON.
func (fw *firmware) stats() string {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"applied": fw.applied, "requests": fw.requests, "bad": fw.bad, "busy": fw.busy,
		"fences": fw.fences, "values": fw.values})
	return string(b)
}

// plug boots a firmware that was unplugged.
func (fw *firmware) plug() error {
	fw.mu.Lock()
	up := fw.wire != nil
	fw.mu.Unlock()
	if up {
		return fmt.Errorf("already plugged in")
	}
	return fw.boot()
}
