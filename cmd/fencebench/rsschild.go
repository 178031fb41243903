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
func rssChild(parent string, n int, out io.Writer, prof profiling) (err error) {
	dir, err := os.MkdirTemp(parent, "rss-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	tokens, err := benchload.NewTokens()
	if err != nil {
		return err
	}
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		return err
	}
	defer b.Close()
	a, err := benchagent.StartAgent(dir, b.URL(), n, tokens.PublicKey())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, a.Stop()) }()
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
}
