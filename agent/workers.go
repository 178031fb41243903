package agent

import (
	"sync"
	"time"
)

// workers runs tasks on goroutines that are kept for a while after their
// task returns, to take the next one. A device's workers start on demand
// and end when its queue drains (queue.go), which under load is after
// nearly every command; a fresh goroutine for each would grow its stack
// again (copying it several times up to the depth the JSON decoder and the
// store reach) and be created and destroyed on every command. A kept
// goroutine has its stack grown already.
//
// The number of goroutines is that of the tasks running (no queue, no
// bound: a task that blocks, e.g. on the group commit, never delays
// another) plus idle ones, each of which ends after idleFor without a task
// or when stop is called.
type workers struct {
	idleFor time.Duration
	hand    chan func()    // unbuffered: a send succeeds only into an idle goroutine
	quit    chan struct{}  // closed by stop
	tasks   sync.WaitGroup // tasks running
	alive   sync.WaitGroup // goroutines, running or idle
	once    sync.Once
}

// workerIdleFor is how long an idle worker waits for its next task: far
// longer than the gap between commands under load, short enough that an
// agent left idle holds no worker goroutines a moment later.
const workerIdleFor = 250 * time.Millisecond

func newWorkers(idleFor time.Duration) *workers {
	return &workers{idleFor: idleFor, hand: make(chan func()), quit: make(chan struct{})}
}

// Go runs task on an idle goroutine, or on a new one if none is idle. It
// never blocks.
func (w *workers) Go(task func()) {
	w.tasks.Add(1)
	select {
	case w.hand <- task:
		return
	default:
	}
	w.alive.Add(1)
	go w.run(task)
}

// run runs task, then the tasks handed to it, until it was idle for idleFor
// or stop was called.
func (w *workers) run(task func()) {
	defer w.alive.Done()
	idle := time.NewTimer(w.idleFor)
	defer idle.Stop()
	for {
		task()
		w.tasks.Done()
		idle.Reset(w.idleFor)
		select {
		case task = <-w.hand:
		case <-idle.C:
			return
		case <-w.quit:
			return
		}
	}
}

// Wait waits until every task given to Go so far has returned (idle
// goroutines do not count). Tasks may call Go.
func (w *workers) Wait() { w.tasks.Wait() }

// stop ends the idle goroutines and waits for them; a goroutine running a
// task ends when the task returns. Go must not be called after stop.
func (w *workers) stop() {
	w.once.Do(func() { close(w.quit) })
	w.alive.Wait()
}
