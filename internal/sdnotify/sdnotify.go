// Package sdnotify tells systemd a Type=notify service's state over the
// datagram socket named by $NOTIFY_SOCKET (sd_notify(3)), without cgo or a
// systemd library.
package sdnotify

import (
	"fmt"
	"net"
	"os"
)

// Ready is the message of a service that finished starting.
const Ready = "READY=1"

// Stopping is the message of a service that began shutting down.
const Stopping = "STOPPING=1"

// Notify sends state (e.g. Ready) to the socket in $NOTIFY_SOCKET. It
// returns false, nil when the variable is unset (not started by systemd,
// or not Type=notify); an abstract socket is written "@name". Safe to call
// concurrently.
func Notify(state string) (bool, error) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return false, nil
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("sdnotify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("sdnotify: %w", err)
	}
	return true, nil
}
