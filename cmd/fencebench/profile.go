package main

import (
	"errors"
	"os"
	"runtime"
	"runtime/pprof"
)

// profiling names the profile files the run writes ("" for none).
type profiling struct{ cpu, heap string }

// run calls f with CPU profiling on if asked and writes the heap profile
// after it.
func (p profiling) run(f func() error) (err error) {
	if p.cpu != "" {
		cf, err := os.Create(p.cpu)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, cf.Close()) }()
		if err := pprof.StartCPUProfile(cf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if err := f(); err != nil {
		return err
	}
	return p.writeHeap()
}

func (p profiling) writeHeap() (err error) {
	if p.heap == "" {
		return nil
	}
	hf, err := os.Create(p.heap)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, hf.Close()) }()
	runtime.GC()
	return pprof.WriteHeapProfile(hf)
}
