package plugins

import (
	"os"
	"time"
)

// parentPoll is how often a plugin built on Serve checks that the agent
// that started it is still its parent.
const parentPoll = 100 * time.Millisecond

// exitParentGone is the exit status of a plugin whose agent went away.
const exitParentGone = 3

// watchParent calls gone, from its own goroutine, once this process's
// parent is no longer parent (the parent died and the process was
// reparented), checking every poll. It cannot use stdin: go-plugin hands a
// plugin the agent's own stdin, whose EOF says nothing about the agent.
// stop ends the watch and waits for its goroutine.
func watchParent(parent int, poll time.Duration, gone func()) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(poll)
		defer t.Stop()
		for os.Getppid() == parent {
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
		gone()
	}()
	return func() {
		close(quit)
		<-done
	}
}

// parentGone ends a plugin whose agent is gone, at once and without
// closing the driver: an Apply may be running, and a plugin nobody fences
// must not act on the device any more. The kernel releases what the
// process held (serial ports, locks).
func parentGone() {
	Logger().Error("the agent that started this plugin is gone; exiting")
	os.Exit(exitParentGone)
}
