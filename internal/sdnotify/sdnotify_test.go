package sdnotify

import (
	"net"
	"path/filepath"
	"testing"
)

func TestNotify(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := Notify(Ready); sent || err != nil {
		t.Fatalf("without NOTIFY_SOCKET: sent %v, err %v", sent, err)
	}
	path := filepath.Join(t.TempDir(), "notify")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	if sent, err := Notify(Ready); !sent || err != nil {
		t.Fatalf("Notify: sent %v, err %v", sent, err)
	}
	buf := make([]byte, 64)
	n, _, err := ln.ReadFromUnix(buf)
	if err != nil || string(buf[:n]) != Ready {
		t.Fatalf("socket got %q (%v), want %q", buf[:n], err, Ready)
	}
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "absent"))
	if _, err := Notify(Ready); err == nil {
		t.Fatal("Notify to a missing socket: no error")
	}
}
