package hwtest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ErrNoGo: the go tool, needed to build the simulator, is not installed.
var ErrNoGo = errors.New("hwtest: the go tool is not on PATH (needed to build hwtest/cmd/simfirmware)")

// BuildSim builds the simulator command hwtest/cmd/simfirmware (a thin main
// around package hwtest/simfirmware) into dir and returns the binary's path.
func BuildSim(dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", ErrNoGo
	}
	bin := filepath.Join(dir, "simfirmware")
	out, err := exec.Command(goTool, "build", "-o", bin, "github.com/fencegate/fencegate/hwtest/cmd/simfirmware").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("hwtest: build simfirmware: %w: %s", err, out)
	}
	return bin, nil
}

// Sim is a running simulator process. Do and its helpers are for one
// goroutine at a time.
type Sim struct {
	// Link is the symlink that always points at the simulator's current
	// pseudo-terminal: the path to give a driver.
	Link    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies chan string
	ready   chan string
	done    chan struct{}
}

// StartSim starts bin speaking protocol ("frame" or "line") on a
// pseudo-terminal linked at dir/<name>, its fence state in dir/<name>.state,
// and waits until it is ready.
func StartSim(bin, protocol, dir, name string) (*Sim, error) {
	s := &Sim{Link: filepath.Join(dir, name), replies: make(chan string, 16), ready: make(chan string, 16), done: make(chan struct{})}
	s.cmd = exec.Command(bin, "--protocol", protocol, "--link", s.Link, "--state", filepath.Join(dir, name+".state"))
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("hwtest: start simfirmware: %w", err)
	}
	go s.readOutput(out)
	if _, err := s.WaitReady(30 * time.Second); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// readOutput routes the simulator's output lines until it exits.
func (s *Sim) readOutput(out io.Reader) {
	defer close(s.done)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if node, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
			s.ready <- node
			continue
		}
		s.replies <- sc.Text()
	}
}

// WaitReady waits for the simulator's next "ready" line and returns the
// node it serves.
func (s *Sim) WaitReady(timeout time.Duration) (string, error) {
	select {
	case node := <-s.ready:
		return node, nil
	case <-s.done:
		return "", errors.New("hwtest: simfirmware exited")
	case <-time.After(timeout):
		return "", errors.New("hwtest: simfirmware not ready in time")
	}
}

// Do sends one control line ("noise", "delay 2s", "unplug", …) and returns
// the text after "ok"; an "error" answer is an error.
func (s *Sim) Do(line string) (string, error) {
	if _, err := io.WriteString(s.stdin, line+"\n"); err != nil {
		return "", err
	}
	select {
	case r := <-s.replies:
		if rest, ok := strings.CutPrefix(r, "ok"); ok {
			return strings.TrimSpace(rest), nil
		}
		return "", fmt.Errorf("hwtest: simfirmware %q: %s", line, r)
	case <-s.done:
		return "", errors.New("hwtest: simfirmware exited")
	case <-time.After(30 * time.Second):
		return "", fmt.Errorf("hwtest: simfirmware did not answer %q", line)
	}
}

// Stats are the simulator's counters and state.
type Stats struct {
	Applied  int                        `json:"applied"`
	Requests int                        `json:"requests"`
	Bad      int                        `json:"bad"`
	Busy     bool                       `json:"busy"`
	Fences   map[string]Fence           `json:"fences"`
	Values   map[string]json.RawMessage `json:"values"`
}

// Fence is the simulator's highest token in a domain.
type Fence struct {
	Epoch  uint64 `json:"epoch"`
	Seq    uint64 `json:"seq"`
	Holder string `json:"holder"`
}

// Stats asks the simulator for its counters and state.
func (s *Sim) Stats() (Stats, error) {
	var st Stats
	out, err := s.Do("stats")
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal([]byte(out), &st)
}

// WaitIdle waits until the simulator is not handling a request (for
// example until a delayed reply has gone out), polling its stats.
func (s *Sim) WaitIdle(timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for {
		st, err := s.Stats()
		switch {
		case err != nil:
			return err
		case !st.Busy:
			return nil
		case time.Now().After(end):
			return errors.New("hwtest: simfirmware still busy")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close ends the simulator (closing its control input ends it) and waits.
func (s *Sim) Close() error {
	s.stdin.Close()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	return s.cmd.Wait()
}
