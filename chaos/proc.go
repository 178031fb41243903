package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one child process of a schedule: a role of the fencechaos binary
// (or another program, such as mosquitto), restartable with the same
// arguments. Its stdout and stderr go to its log file; a line "ready …" on
// stdout tells start it serves.
type proc struct {
	name    string
	path    string   // the program
	args    []string // its arguments
	env     []string // added to the environment
	logPath string
	ready   bool // wait for a "ready" line at start
	stdin   bool // keep a pipe to its standard input (control lines)
	// supervise restarts the process a second after it exits on its own,
	// as systemd's Restart=on-failure does for the agent and controller;
	// each such exit is kept in exits.
	supervise bool

	mu     sync.Mutex
	cmd    *exec.Cmd
	in     io.WriteCloser
	exited chan struct{} // closed when the current process ended
	lines  chan string   // stdout lines after "ready" (control answers)
	down   bool          // the harness ended it (kill, stop): no restart
	exits  []string      // exits the harness did not cause
}

// restartDelay is how long a supervised process stays down after it
// exited on its own (systemd's RestartSec).
const restartDelay = time.Second

// start launches the process and, if p.ready, waits for its ready line.
func (p *proc) start(ctx context.Context) error {
	logf, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	var in io.WriteCloser
	if p.stdin {
		if in, err = cmd.StdinPipe(); err != nil {
			logf.Close()
			return err
		}
	}
	fmt.Fprintf(logf, "--- %s start %s %s\n", time.Now().Format(time.RFC3339Nano), p.path, strings.Join(p.args, " "))
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	readyc := make(chan struct{})
	lines := make(chan string, 64)
	exited := make(chan struct{})
	go p.pump(out, logf, readyc, lines)
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logf, "--- %s exit %v\n", time.Now().Format(time.RFC3339Nano), err)
		logf.Close()
		close(exited)
		p.exitedOnItsOwn(err)
	}()
	p.mu.Lock()
	p.cmd, p.in, p.exited, p.lines, p.down = cmd, in, exited, lines, false
	p.mu.Unlock()
	if !p.ready {
		return nil
	}
	select {
	case <-readyc:
		return nil
	case <-exited:
		return fmt.Errorf("%s exited before it was ready (see %s)", p.name, p.logPath)
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("%s not ready: %w", p.name, ctx.Err())
	}
}

// pump copies stdout to the log, signals the first ready line and passes
// later lines on.
func (p *proc) pump(out io.Reader, logf io.Writer, readyc chan struct{}, lines chan string) {
	sc := bufio.NewScanner(out)
	readySeen := false
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(logf, line)
		switch {
		case !readySeen && strings.HasPrefix(line, "ready"):
			readySeen = true
			close(readyc)
		case readySeen:
			select {
			case lines <- line:
			default:
			}
		}
	}
}

// exitedOnItsOwn records an exit the harness did not cause and, for a
// supervised process, starts it again after restartDelay.
func (p *proc) exitedOnItsOwn(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down || !p.supervise && err == nil { // a supervisor ends by itself at the end of the schedule
		return
	}
	p.exits = append(p.exits, fmt.Sprintf("%s exited on its own at %s: %v (see %s)",
		p.name, time.Now().UTC().Format("15:04:05.000"), err, filepath.Base(p.logPath)))
	if p.supervise {
		time.AfterFunc(restartDelay, p.restart)
	}
}

// restart starts a supervised process again unless the harness ended it
// meanwhile.
func (p *proc) restart() {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		return
	}
	if err := p.start(context.Background()); err != nil {
		p.mu.Lock()
		p.exits = append(p.exits, fmt.Sprintf("%s restart failed: %v", p.name, err))
		p.mu.Unlock()
	}
}

// unexpectedExits are the exits the harness did not cause.
func (p *proc) unexpectedExits() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.exits)
}

// pid is the running process's id, 0 if none.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// signal sends sig to the running process.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return errors.New(p.name + " is not running")
	}
	return p.cmd.Process.Signal(sig)
}

// kill SIGKILLs the process and waits until it is gone.
func (p *proc) kill() {
	p.markDown()
	_ = p.signal(syscall.SIGKILL)
	p.wait(10 * time.Second)
}

// stop asks the process to end (SIGCONT first, in case it was stopped,
// then SIGTERM) and kills it if it has not ended within grace.
func (p *proc) stop(grace time.Duration) {
	p.markDown()
	_ = p.signal(syscall.SIGCONT)
	_ = p.signal(syscall.SIGTERM)
	if !p.wait(grace) {
		p.kill()
	}
}

// markDown notes that the harness ends the process: its exit is expected.
func (p *proc) markDown() {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
}

// wait waits up to d for the current process to end; it reports whether it did.
func (p *proc) wait(d time.Duration) bool {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited == nil {
		return true
	}
	select {
	case <-exited:
		return true
	case <-time.After(d):
		return false
	}
}

// control writes one control line to the process's stdin and returns its
// answer line (the firmware's "ok …" or "error …").
func (p *proc) control(line string) (string, error) {
	p.mu.Lock()
	in, lines := p.in, p.lines
	p.mu.Unlock()
	if in == nil {
		return "", errors.New(p.name + " has no control input")
	}
	for len(lines) > 0 { // drop answers nobody waited for
		<-lines
	}
	if _, err := io.WriteString(in, line+"\n"); err != nil {
		return "", fmt.Errorf("%s control %q: %w", p.name, line, err)
	}
	select {
	case a := <-lines:
		if strings.HasPrefix(a, "error") {
			return a, fmt.Errorf("%s control %q: %s", p.name, line, a)
		}
		return a, nil
	case <-time.After(5 * time.Second):
		return "", fmt.Errorf("%s control %q: no answer", p.name, line)
	}
}
