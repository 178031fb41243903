package mqtt

import (
	"bytes"
	"net"
	"sync"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// takeoverGuard serializes, per client id, a connection's session set-up
// against the teardown of an earlier connection with the same id.
//
// mochi 2.7.9 ends a clean-session connection with "if not taken over:
// unsubscribe, then delete the id from the client list". A client that
// reconnects at once can take the session over between that check and
// the delete: the delete then removes the new client from the list,
// and mochi delivers only to listed clients, so a connected, subscribed
// client gets nothing until it connects again. Under the guard a
// connection holds its id's lock from OnSessionEstablish (before the
// take-over) to OnSessionEstablished (after it joined the list), and
// again from OnDisconnect (before the check) until mochi is done with it
// (its listener's establish call returned), so the two never interleave.
type takeoverGuard struct {
	mochi.HookBase
	mu    sync.Mutex
	locks map[string]*idLock    // by client id, while any connection holds or waits for it
	held  map[net.Conn]heldLock // the lock each connection holds or waits for
}

type idLock struct {
	mu   sync.Mutex
	refs int // connections holding or waiting
}

type heldLock struct {
	id   string
	lock *idLock
}

func newTakeoverGuard() *takeoverGuard {
	return &takeoverGuard{locks: map[string]*idLock{}, held: map[net.Conn]heldLock{}}
}

func (g *takeoverGuard) ID() string { return "fencegate-takeover-guard" }

func (g *takeoverGuard) Provides(b byte) bool {
	return bytes.Contains([]byte{mochi.OnSessionEstablish, mochi.OnSessionEstablished, mochi.OnDisconnect}, []byte{b})
}

// OnSessionEstablish runs before mochi takes over an earlier session.
func (g *takeoverGuard) OnSessionEstablish(cl *mochi.Client, _ packets.Packet) {
	g.hold(cl.Net.Conn, cl.ID)
}

// OnSessionEstablished runs once the client is in the list.
func (g *takeoverGuard) OnSessionEstablished(cl *mochi.Client, _ packets.Packet) {
	g.release(cl.Net.Conn)
}

// OnDisconnect runs before mochi checks for a take-over and deletes the id.
func (g *takeoverGuard) OnDisconnect(cl *mochi.Client, _ error, _ bool) {
	g.hold(cl.Net.Conn, cl.ID)
}

// hold takes id's lock for conn, unless conn holds one already. A nil
// conn (a client mochi made from storage) takes none.
func (g *takeoverGuard) hold(conn net.Conn, id string) {
	if conn == nil {
		return
	}
	g.mu.Lock()
	if _, ok := g.held[conn]; ok {
		g.mu.Unlock()
		return
	}
	l := g.locks[id]
	if l == nil {
		l = &idLock{}
		g.locks[id] = l
	}
	l.refs++
	g.held[conn] = heldLock{id: id, lock: l}
	g.mu.Unlock()
	l.mu.Lock()
}

// release gives up the lock conn holds, if any.
func (g *takeoverGuard) release(conn net.Conn) {
	g.mu.Lock()
	h, ok := g.held[conn]
	if !ok {
		g.mu.Unlock()
		return
	}
	delete(g.held, conn)
	if h.lock.refs--; h.lock.refs == 0 {
		delete(g.locks, h.id)
	}
	g.mu.Unlock()
	h.lock.mu.Unlock()
}

// guardedListener releases a connection's lock once mochi is done with
// it: after the delete at its end, or after a set-up that failed before
// OnSessionEstablished.
type guardedListener struct {
	listeners.Listener
	guard *takeoverGuard
}

func (l guardedListener) Serve(establish listeners.EstablishFn) {
	l.Listener.Serve(func(id string, c net.Conn) error {
		defer l.guard.release(c)
		return establish(id, c)
	})
}
