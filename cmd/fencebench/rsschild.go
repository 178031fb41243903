package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/fencegate/fencegate/internal/benchagent"
	"github.com/fencegate/fencegate/internal/benchload"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// rssChild is the -rss-child mode: an embedded broker and an agent with n
// idle devices in this process; once the agent is online and two garbage
// collections have run, it prints the process's RSS in bytes to out (and
// writes prof's heap profile, if named, while the agent still runs).
func rssChild(parent string, n int, out io.Writer, prof profiling) error {
	return withLocalAgent(parent, "rss-", n, benchagent.Options{}, func(*localAgent) error {
		time.Sleep(time.Second) // the connect-time state announcements drain
		runtime.GC()
		runtime.GC()
		rss, err := benchagent.RSS()
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(out, rss); err != nil {
			return err
		}
		return prof.writeHeap()
	})
}

// localAgent is an embedded broker and a bench agent in this process, with
// the token pool that signs for the agent's trusted key.
type localAgent struct {
	tokens *benchload.Tokens
	broker *mqtt.Embedded
	agent  *benchagent.Agent
}

// withLocalAgent starts a localAgent with devices devices and opts, its
// store in a new directory named by prefix under parent, runs f with it,
// and stops and removes everything afterwards.
func withLocalAgent(parent, prefix string, devices int, opts benchagent.Options, f func(*localAgent) error) (err error) {
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	l := &localAgent{}
	if l.tokens, err = benchload.NewTokens(); err != nil {
		return err
	}
	if l.broker, err = mqtt.StartEmbedded("127.0.0.1:0", nil); err != nil {
		return err
	}
	defer l.broker.Close()
	if l.agent, err = benchagent.StartAgentWith(dir, l.broker.URL(), devices, l.tokens.PublicKey(), opts); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, l.agent.Stop()) }()
	return f(l)
}
