package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// runner is the etcdtest.T of a command: Fatal ends the work under do with
// an error, Cleanup functions run at close, last first.
type runner struct {
	dir      string // scratch directory, removed at close
	temps    int
	cleanups []func()
}

// errFatal carries a Fatal's message out of do.
type errFatal struct{ msg string }

func newRunner(parent string) (*runner, error) {
	dir, err := os.MkdirTemp(parent, "fencebench-etcd-")
	if err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	return &runner{dir: dir}, nil
}

// do runs f and turns a Fatal inside it into an error.
func (r *runner) do(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			fe, ok := v.(errFatal)
			if !ok {
				panic(v)
			}
			err = errors.New(fe.msg)
		}
	}()
	return f()
}

func (r *runner) close() {
	for _, f := range slices.Backward(r.cleanups) {
		f()
	}
	os.RemoveAll(r.dir)
}

func (r *runner) Helper()                           {}
func (r *runner) Fatal(args ...any)                 { panic(errFatal{fmt.Sprint(args...)}) }
func (r *runner) Fatalf(format string, args ...any) { panic(errFatal{fmt.Sprintf(format, args...)}) }
func (r *runner) Cleanup(f func())                  { r.cleanups = append(r.cleanups, f) }

// TempDir returns a new directory inside the scratch directory.
func (r *runner) TempDir() string {
	r.temps++
	dir := filepath.Join(r.dir, strconv.Itoa(r.temps))
	if err := os.Mkdir(dir, 0o700); err != nil {
		r.Fatal(err)
	}
	return dir
}
