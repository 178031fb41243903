package netproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// patience bounds every wait for something that must happen; reaching
	// it fails the test (it is not a performance bound).
	patience = 10 * time.Second
	// quiet is how long a read waits to show that nothing arrives. A slow
	// machine can only make such a check pass, never fail.
	quiet = 200 * time.Millisecond
)

// server is a TCP server on 127.0.0.1 that hands every connection it
// accepts to the test, so the test holds both ends of a proxied link.
type server struct {
	ln    net.Listener
	conns chan net.Conn
	wg    sync.WaitGroup
}

// newServer starts a server; the test's cleanup stops it and closes the
// connections nobody took.
func newServer(t *testing.T) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &server{ln: ln, conns: make(chan net.Conn, 16)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns <- c
		}
	}()
	t.Cleanup(s.stop)
	return s
}

// addr is where the server listens.
func (s *server) addr() string { return s.ln.Addr().String() }

// stop closes the listener, waits for the accept loop and closes the
// connections still queued.
func (s *server) stop() {
	_ = s.ln.Close()
	s.wg.Wait()
	for {
		select {
		case c := <-s.conns:
			_ = c.Close()
		default:
			return
		}
	}
}

// accept returns the next connection the server accepted.
func (s *server) accept(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-s.conns:
		t.Cleanup(func() { _ = c.Close() })
		return c
	case <-time.After(patience):
		t.Fatalf("server accepted no connection in %v", patience)
		return nil
	}
}

// noConn checks that the server accepts no connection for a while.
func (s *server) noConn(t *testing.T) {
	t.Helper()
	select {
	case c := <-s.conns:
		_ = c.Close()
		t.Fatalf("server accepted a connection from %v, want none", c.RemoteAddr())
	case <-time.After(quiet):
	}
}

// echoServer starts a server that writes back whatever it reads, one
// goroutine per connection, and returns its address. The test's cleanup
// closes the listener and every connection and waits for the goroutines.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// startProxy starts a proxy to target that the test's cleanup closes.
func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := Listen("127.0.0.1:0", target)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// dial connects to the proxy; the test's cleanup closes the connection.
func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("dial proxy: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// dialRefused checks that a connection to the proxy ends at once: the
// dial itself fails with a reset (the proxy reset the connection before
// the client's connect returned) or the stream ends with no bytes.
func dialRefused(t *testing.T, p *Proxy) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("dial proxy: %v, want success or a reset", err)
		}
		return
	}
	defer c.Close()
	readClosed(t, c)
}

// pair dials the proxy and returns the client's end and the end the
// server accepted once the proxy dialed it.
func pair(t *testing.T, p *Proxy, s *server) (client, srv net.Conn) {
	t.Helper()
	client = dial(t, p)
	return client, s.accept(t)
}

// write writes msg to c.
func write(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
}

// readN reads exactly n bytes from c.
func readN(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(patience))
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	return buf
}

// expect reads len(want) bytes from c and checks they are want.
func expect(t *testing.T, c net.Conn, want string) {
	t.Helper()
	if got := string(readN(t, c, len(want))); got != want {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// readNothing checks that nothing, not even the end of the stream,
// arrives on c for a while.
func readNothing(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(quiet))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %q, %v; want nothing until the deadline", buf[:n], err)
	}
}

// readClosed checks that c's stream ends (EOF or a reset) with no more
// bytes before it.
func readClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(patience))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if n > 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %q, %v; want the end of the stream", buf[:n], err)
	}
}

// waitFor waits until cond holds, failing the test after patience.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after %v", what, patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closedPort returns a 127.0.0.1 address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
