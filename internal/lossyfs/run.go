package lossyfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// Ready is the line a child run by RunAndCut prints once it is set up;
// the power may go any time after it.
const Ready = "READY"

// ReadyTimeout bounds how long RunAndCut waits for Ready.
const ReadyTimeout = 60 * time.Second

// ErrNotReady: the child exited or stayed silent before printing Ready.
var ErrNotReady = errors.New("lossyfs: child not ready")

// RunAndCut runs one power-loss round: it starts cmd (its Stdout must be
// unset), waits for its Ready line, lets it work for d, SIGKILLs it, reaps
// it and cuts the power with opts. It returns the complete lines cmd
// printed after Ready — each one an acknowledgement made before the cut; a
// line the kill interrupted is dropped — and what the cut dropped.
func (m *Mount) RunAndCut(cmd *exec.Cmd, d time.Duration, opts CutOptions) ([]string, CutReport, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, CutReport{}, fmt.Errorf("lossyfs: run: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, CutReport{}, fmt.Errorf("lossyfs: run: %w", err)
	}
	m.Register(cmd.Process)
	ready, eof, lines := make(chan struct{}), make(chan struct{}), make(chan []string, 1)
	go func() { // ends at EOF: when cmd is dead
		l := readLines(out, ready)
		close(eof)
		lines <- l
	}()
	select {
	case <-ready:
		time.Sleep(d) // the random moment of the cut, not a synchronization
	case <-eof:
		err = fmt.Errorf("%w: it exited first", ErrNotReady)
	case <-time.After(ReadyTimeout):
		err = fmt.Errorf("%w after %v", ErrNotReady, ReadyTimeout)
	}
	_ = cmd.Process.Kill()
	acks := <-lines
	_ = cmd.Wait() // killed: its error says so
	rep, cerr := m.Cut(opts)
	return acks, rep, errors.Join(err, cerr)
}

// readLines returns the complete lines of r after the Ready line (closing
// ready when it comes) until EOF.
func readLines(r io.Reader, ready chan<- struct{}) []string {
	br := bufio.NewReader(r)
	var lines []string
	seen := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return lines
		}
		line = strings.TrimSuffix(line, "\n")
		if !seen && line == Ready {
			seen = true
			close(ready)
			continue
		}
		lines = append(lines, line)
	}
}
