package plugins

import "runtime"

// spawner runs plugin starts on one OS thread, locked to its goroutine for
// the spawner's whole life. On Linux a plugin process gets SIGKILL when the
// thread that forked it ends (Pdeathsig follows the thread, not the
// process: go.dev/issue/27505); forking from a thread that only ends with
// the agent process, or when the Host is closed, makes that signal mean
// "the agent is gone" rather than "the Go runtime retired a thread".
//
// The goroutine is owned by the Host: started by Open, ended by stop,
// which Close calls once the supervisor has returned.
type spawner struct {
	reqs chan func()   // closed by stop
	done chan struct{} // closed when the goroutine has returned
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan func()), done: make(chan struct{})}
	go s.run()
	return s
}

// run runs requests until stop. It returns with the thread still locked,
// so the runtime ends the thread (and Pdeathsig reaches any child left).
func (s *spawner) run() {
	runtime.LockOSThread()
	defer close(s.done)
	for fn := range s.reqs {
		fn()
	}
}

// do runs fn on the spawner's thread and returns when fn has. Not after
// stop; calls from several goroutines run one at a time.
func (s *spawner) do(fn func()) {
	finished := make(chan struct{})
	s.reqs <- func() {
		defer close(finished)
		fn()
	}
	<-finished
}

// stop ends the goroutine and its thread; call once, after the last do.
func (s *spawner) stop() {
	close(s.reqs)
	<-s.done
}
