//go:build !linux

package serial

import (
	"errors"
	"time"
)

var errNotLinux = errors.New("serial: exclusive ports are implemented on Linux only")

func lockNode(string) (int, error)                { return -1, errNotLinux }
func setExclusive(int) error                      { return errNotLinux }
func unlockNode(int) error                        { return errNotLinux }
func ioPath(_ int, path string) string            { return path }
func checkExclusive(int, string) error            { return errNotLinux }
func writeNB(int, []byte, time.Time) (int, error) { return 0, errNotLinux }
