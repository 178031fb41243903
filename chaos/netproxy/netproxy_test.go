package netproxy

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// A megabyte sent through the proxy to an echo server comes back intact,
// and the counters show it crossed once each way.
func TestForwardsBothWays(t *testing.T) {
	p := startProxy(t, echoServer(t))
	c := dial(t, p)
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	werr := make(chan error, 1)
	go func() {
		for rest := data; len(rest) > 0; rest = rest[min(len(rest), 1000):] {
			if _, err := c.Write(rest[:min(len(rest), 1000)]); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	got := readN(t, c, len(data))
	if err := <-werr; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("echoed bytes differ from those sent")
	}
	waitFor(t, "counted", func() bool {
		s := p.Stats()
		return s.Accepted == 1 && s.Live == 1 && s.Up == int64(len(data)) && s.Down == int64(len(data))
	})
}

// A full blackhole holds both directions of a live connection; Heal
// delivers what was held, in order.
func TestBlackholeHoldsThenDeliversInOrder(t *testing.T) {
	s := newServer(t)
	p := startProxy(t, s.addr())
	client, srv := pair(t, p, s)
	write(t, client, "before ")
	expect(t, srv, "before ")

	p.Partition(Blackhole)
	for _, m := range []string{"one ", "two ", "three"} {
		write(t, client, m)
	}
	write(t, srv, "reply")
	readNothing(t, srv)
	readNothing(t, client)

	p.Heal()
	expect(t, srv, "one two three")
	expect(t, client, "reply")
	waitFor(t, "counted", func() bool {
		st := p.Stats()
		return st.Up == int64(len("before one two three")) && st.Down == int64(len("reply"))
	})
}

// A one-way blackhole stops only its own direction.
func TestOneWayBlackhole(t *testing.T) {
	for _, tc := range []struct {
		mode        Mode
		stopsClient bool // client→target stopped (else target→client)
	}{{BlackholeUp, true}, {BlackholeDown, false}} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			s := newServer(t)
			p := startProxy(t, s.addr())
			client, srv := pair(t, p, s)
			p.Partition(tc.mode)
			write(t, client, "up")
			write(t, srv, "down")
			held, heldMsg, flows, flowsMsg := srv, "up", client, "down"
			if !tc.stopsClient {
				held, heldMsg, flows, flowsMsg = client, "down", srv, "up"
			}
			expect(t, flows, flowsMsg)
			readNothing(t, held)
			p.Heal()
			expect(t, held, heldMsg)
		})
	}
}

// A connection accepted during a blackhole is not dialed until Heal, then
// gets the bytes its client sent meanwhile and works both ways.
func TestConnectionOpenedDuringBlackhole(t *testing.T) {
	s := newServer(t)
	p := startProxy(t, s.addr())
	p.Partition(Blackhole)
	client := dial(t, p)
	write(t, client, "hello")
	s.noConn(t)
	readNothing(t, client)

	p.Heal()
	srv := s.accept(t)
	expect(t, srv, "hello")
	write(t, srv, "hi")
	expect(t, client, "hi")
}

// Under BlackholeDown the target does see a new connection and its bytes:
// only the answers are held.
func TestConnectionOpenedDuringDownBlackhole(t *testing.T) {
	s := newServer(t)
	p := startProxy(t, s.addr())
	p.Partition(BlackholeDown)
	client := dial(t, p)
	write(t, client, "hello")
	srv := s.accept(t)
	expect(t, srv, "hello")
	write(t, srv, "hi")
	readNothing(t, client)
	p.Heal()
	expect(t, client, "hi")
}

// A client that gives up on a connection accepted during a blackhole
// leaves nothing for the target: after Heal the first connection the
// target sees is a later one.
func TestConnectionAbandonedDuringBlackholeNeverReachesTarget(t *testing.T) {
	s := newServer(t)
	p := startProxy(t, s.addr())
	p.Partition(Blackhole)
	a := dial(t, p)
	write(t, a, "stale")
	// The proxy counts a connection once its accept loop has taken it: wait
	// for that, or Live is 0 before a was ever held, and a reaches the
	// target after Heal.
	waitFor(t, "held", func() bool { return p.Stats().Live == 1 })
	_ = a.Close()
	waitFor(t, "dropped", func() bool { return p.Stats().Live == 0 })

	p.Heal()
	b := dial(t, p)
	write(t, b, "fresh")
	expect(t, s.accept(t), "fresh")
}

// A close during a blackhole is held like data: the client sees neither
// the bytes sent before it nor the end until Heal, then both in order.
func TestCloseHeldDuringBlackhole(t *testing.T) {
	s := newServer(t)
	p := startProxy(t, s.addr())
	client, srv := pair(t, p, s)
	p.Partition(Blackhole)
	write(t, srv, "bye")
	_ = srv.Close()
	readNothing(t, client)
	if live := p.Stats().Live; live != 1 {
		t.Fatalf("Live = %d during the blackhole, want 1", live)
	}
	p.Heal()
	expect(t, client, "bye")
	readClosed(t, client)
	waitFor(t, "forgotten", func() bool { return p.Stats().Live == 0 })
}

// Either side closing closes the other.
func TestCloseForwarded(t *testing.T) {
	s := newServer(t)
	p := startProxy(t, s.addr())
	client, srv := pair(t, p, s)
	_ = client.Close()
	readClosed(t, srv)

	client, srv = pair(t, p, s)
	_ = srv.Close()
	readClosed(t, client)
	waitFor(t, "all forgotten", func() bool { return p.Stats().Live == 0 })
}

// Reset ends live connections on both sides at once and refuses new ones
// until Heal.
func TestResetClosesLiveAndRefusesNew(t *testing.T) {
	s := newServer(t)
	p := startProxy(t, s.addr())
	client, srv := pair(t, p, s)
	p.Partition(Reset)
	readClosed(t, client)
	readClosed(t, srv)

	dialRefused(t, p)
	s.noConn(t)
	if st := p.Stats(); st.Refused != 1 || st.Live != 0 || st.Accepted != 2 {
		t.Fatalf("Stats = %+v, want 2 accepted, 1 refused, none live", st)
	}

	p.Heal()
	client, srv = pair(t, p, s)
	write(t, client, "again")
	expect(t, srv, "again")
}

// With a delay and a jitter larger than the gap between messages, every
// message still arrives, in order, and none before the delay has passed
// since it was sent; in both directions.
func TestDelayKeepsOrder(t *testing.T) {
	const d, jitter, n = 80 * time.Millisecond, 60 * time.Millisecond, 20
	s := newServer(t)
	p := startProxy(t, s.addr())
	client, srv := pair(t, p, s)
	p.SetDelay(d, jitter)
	for _, dir := range []struct {
		name     string
		from, to net.Conn
	}{{"up", client, srv}, {"down", srv, client}} {
		sent := make([]time.Time, n)
		for i := range n {
			sent[i] = time.Now()
			write(t, dir.from, fmt.Sprintf("msg-%03d;", i))
			time.Sleep(2 * time.Millisecond) // separate reads, so jitter could reorder
		}
		for i := range n {
			want := fmt.Sprintf("msg-%03d;", i)
			got := string(readN(t, dir.to, len(want)))
			if got != want {
				t.Fatalf("%s: message %d is %q, want %q", dir.name, i, got, want)
			}
			if early := d - time.Since(sent[i]); early > 0 {
				t.Fatalf("%s: message %d arrived %v before its delay of %v", dir.name, i, early, d)
			}
		}
	}
	p.SetDelay(0, 0)
	write(t, client, "now")
	expect(t, srv, "now")
}

// SetTarget sends new connections to the new address; a live connection
// stays with the old one.
func TestSetTargetMovesNewConnections(t *testing.T) {
	a, b := newServer(t), newServer(t)
	p := startProxy(t, a.addr())
	oldClient, oldSrv := pair(t, p, a)

	p.SetTarget(b.addr())
	newClient, newSrv := pair(t, p, b)
	write(t, newClient, "to b")
	expect(t, newSrv, "to b")
	write(t, oldClient, "to a")
	expect(t, oldSrv, "to a")
	a.noConn(t)
}

// A target that cannot be dialed ends the client's connection at once.
func TestDialFailureClosesClient(t *testing.T) {
	p := startProxy(t, closedPort(t))
	dialRefused(t, p)
	waitFor(t, "forgotten", func() bool { return p.Stats().Live == 0 })
	if st := p.Stats(); st.DialFailed != 1 || st.Accepted != 1 {
		t.Fatalf("Stats = %+v, want 1 accepted, 1 failed dial", st)
	}
}

// Close with connections in every state (forwarding, a chunk waiting out a
// delay, held by a blackhole, not yet dialed) ends them all, closes the
// listener and leaves none of the proxy's goroutines behind.
func TestCloseLeavesNothing(t *testing.T) {
	s := newServer(t)
	before := runtime.NumGoroutine()
	p, err := Listen("127.0.0.1:0", s.addr())
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	busy, busySrv := pair(t, p, s)
	write(t, busy, "x")
	expect(t, busySrv, "x")
	delayed, delayedSrv := pair(t, p, s)
	p.SetDelay(time.Hour, 0)
	write(t, delayed, "late")
	held, heldSrv := pair(t, p, s)
	p.Partition(Blackhole)
	write(t, held, "held")
	undialed := dial(t, p)
	write(t, undialed, "never")
	waitFor(t, "all four accepted", func() bool { return p.Stats().Accepted == 4 })

	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := p.running.Load(); n != 0 {
		t.Fatalf("%d proxy goroutines still running after Close", n)
	}
	for _, c := range []net.Conn{busy, delayed, held, undialed, busySrv, delayedSrv, heldSrv} {
		readClosed(t, c)
	}
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		_ = c.Close()
		t.Fatal("the proxy's address still accepts connections after Close")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	waitFor(t, "back to the goroutines before Listen", func() bool {
		return runtime.NumGoroutine() <= before
	})
}

// Partitions, heals and delay changes from another goroutine while a
// stream flows neither lose, duplicate nor reorder a byte of it.
func TestConcurrentControlKeepsStreamIntact(t *testing.T) {
	p := startProxy(t, echoServer(t))
	c := dial(t, p)
	data := make([]byte, 256<<10)
	_, _ = rand.Read(data)

	written := make(chan struct{})
	go func() { // paced, so that the toggling below overlaps the stream
		defer close(written)
		for rest := data; len(rest) > 0; rest = rest[min(len(rest), 4096):] {
			if _, err := c.Write(rest[:min(len(rest), 4096)]); err != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		modes := []Mode{Blackhole, None, BlackholeUp, None, BlackholeDown, None}
		for i := 0; ; i++ {
			select {
			case <-written:
				p.SetDelay(0, 0)
				p.Heal()
				return
			case <-time.After(time.Millisecond):
			}
			p.Partition(modes[i%len(modes)])
			p.SetDelay(time.Duration(i%3)*time.Millisecond, time.Duration(i%2)*time.Millisecond)
		}
	}()
	got := readN(t, c, len(data))
	wg.Wait()
	if !bytes.Equal(got, data) {
		t.Fatal("stream changed in transit")
	}
	waitFor(t, "counted", func() bool {
		st := p.Stats()
		return st.Up == int64(len(data)) && st.Down == int64(len(data))
	})
}

// Partition refuses a mode that is not one of the constants.
func TestPartitionUnknownModePanics(t *testing.T) {
	p := startProxy(t, closedPort(t))
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "unknown mode") {
			t.Fatalf("recovered %v, want an unknown-mode panic", r)
		}
	}()
	p.Partition(Reset + 1)
}
