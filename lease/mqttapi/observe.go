package mqttapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/protocol"
)

// ErrNotObserved: the server has not read the broker's retained grants
// and device states yet, so the epoch floor is unknown.
var ErrNotObserved = errors.New("mqttapi: retained grants and device states not read yet")

var _ lease.EpochFloor = (*Server)(nil)

// watch is one domain's grant subscription on the current connection.
type watch struct {
	done chan struct{} // closed once its retained grant was read, or the read failed
	err  error         // why the read failed; set before done is closed
}

// observed is what the server learnt from the broker beyond grants: the
// highest device-state epoch, and the sync messages that tell it that
// everything the broker sent before has been handled.
type observed struct {
	topic string        // this server's sync topic, in the reply namespace
	nonce string        // this process's prefix of sync payloads
	first chan struct{} // closed after the first complete read
	// unsynced is set when a sync message did not come back (the broker
	// ACL does not let the server read its sync topic): retained messages
	// are then taken as read once their subscription is acknowledged.
	unsynced atomic.Bool

	mu sync.Mutex // guards the fields below
	// deviceEpoch is the highest fence epoch of a device state that names
	// no domain (an older agent): it counts for every domain.
	deviceEpoch uint64
	// domainFence is, per domain, the highest fence position of the device
	// states naming that domain.
	domainFence map[string]position
	syncs       map[string]chan struct{}
	next        uint64
	firstDone   bool
}

// newObserved builds the observer of client id: its sync topic is
// {replies}/{client id}/sync, where a broker ACL lets each client read its
// own replies (or a random one if the id cannot be a topic level).
func newObserved(t protocol.Topics, clientID string) *observed {
	b := make([]byte, 8)
	rand.Read(b)
	nonce := hex.EncodeToString(b)
	topic := t.ReplyTopic(clientID) + "/sync"
	if clientID == "" || strings.ContainsAny(clientID, "/+#$\x00") {
		topic = t.Replies() + "fencegate-controller-sync/" + nonce
	}
	return &observed{topic: topic, nonce: nonce, first: make(chan struct{}), syncs: map[string]chan struct{}{},
		domainFence: map[string]position{}}
}

// position is a token position (epoch, seq).
type position struct{ epoch, seq uint64 }

// above reports whether p sorts above q.
func (p position) above(q position) bool {
	return fence.ComparePosition(p.epoch, p.seq, q.epoch, q.seq) > 0
}

// Floor implements lease.EpochFloor: the highest position of domain's
// verified retained grant, of the device states naming domain, and (epoch,
// 0) of any device state naming no domain. The first call for
// a domain on a connection reads its retained grant (a subscription and a
// round trip). Before the first connection has been read it waits for it,
// bounded by ctx and 10 s, then fails with ErrNotObserved; while the broker
// is unreachable afterwards it answers from what it saw before. Safe for
// concurrent use.
func (s *Server) Floor(ctx context.Context, domain string) (epoch, seq uint64, err error) {
	if err := s.awaitFirst(ctx); err != nil {
		return 0, 0, err
	}
	if s.verify != nil && s.client.IsConnectionOpen() {
		if err := s.readGrant(ctx, domain); err != nil {
			return 0, 0, fmt.Errorf("read the retained grant of %s: %w", domain, err)
		}
	}
	var p position
	p.epoch, p.seq = s.pub.position(domain)
	for _, q := range s.obs.devicePositions(domain) {
		if q.above(p) {
			p = q
		}
	}
	return p.epoch, p.seq, nil
}

// devicePositions are the device-state positions that bound domain.
func (o *observed) devicePositions(domain string) [2]position {
	o.mu.Lock()
	defer o.mu.Unlock()
	return [2]position{o.domainFence[domain], {epoch: o.deviceEpoch}}
}

func (s *Server) awaitFirst(ctx context.Context) error {
	t := time.NewTimer(publishTimeout)
	defer t.Stop()
	select {
	case <-s.obs.first:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotObserved, ctx.Err())
	case <-t.C:
		return fmt.Errorf("%w: not connected to the broker in %v", ErrNotObserved, publishTimeout)
	}
}

// readGrant makes sure domain's retained grant has been read on this
// connection, reading it if no one has.
func (s *Server) readGrant(ctx context.Context, domain string) error {
	w, fresh := s.watchEntry(domain)
	if fresh {
		tok := s.client.Subscribe(s.cfg.Topics.LeaseGrant(domain), 1, s.onGrantSeen)
		if w.err = waitToken(ctx, tok); w.err == nil && !s.obs.unsynced.Load() {
			w.err = s.sync(ctx)
		}
		if w.err != nil {
			s.dropWatch(domain, w) // the next grant tries again
		}
		close(w.done)
	}
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watchEntry returns domain's watch, creating it (fresh) if absent.
func (s *Server) watchEntry(domain string) (w *watch, fresh bool) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if w, ok := s.watched[domain]; ok {
		return w, false
	}
	w = &watch{done: make(chan struct{})}
	s.watched[domain] = w
	return w, true
}

func (s *Server) dropWatch(domain string, w *watch) {
	s.watchMu.Lock()
	if s.watched[domain] == w {
		delete(s.watched, domain)
	}
	s.watchMu.Unlock()
}

// observe reads, on a new connection, the retained grants of every known
// domain and every retained device state, and waits until all of them
// have been handled.
func (s *Server) observe(ctx context.Context) error {
	watches := s.resetWatches()
	toks := []paho.Token{
		s.client.Subscribe(s.obs.topic, 1, s.onSync),
		s.client.Subscribe(s.cfg.Topics.DeviceState("+"), 1, s.onDeviceState),
	}
	for d := range watches {
		toks = append(toks, s.client.Subscribe(s.cfg.Topics.LeaseGrant(d), 1, s.onGrantSeen))
	}
	var err error
	for _, tok := range toks {
		err = errors.Join(err, waitToken(ctx, tok))
	}
	if err == nil {
		err = s.syncOrDegrade(ctx)
	}
	for _, w := range watches {
		w.err = err
		close(w.done)
	}
	if err == nil {
		s.firstRead()
	}
	return err
}

// resetWatches forgets the previous connection's watches and makes one
// for every domain with a known grant, if the server verifies grants.
func (s *Server) resetWatches() map[string]*watch {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	clear(s.watched)
	if s.verify == nil {
		return nil
	}
	for _, d := range s.pub.domains() {
		s.watched[d] = &watch{done: make(chan struct{})}
	}
	return maps.Clone(s.watched)
}

func (s *Server) firstRead() {
	s.obs.mu.Lock()
	defer s.obs.mu.Unlock()
	if !s.obs.firstDone {
		s.obs.firstDone = true
		close(s.obs.first)
	}
}

// syncOrDegrade syncs; a sync message that does not come back (while the
// connection holds) switches to unsynced reads, with an error log naming
// the ACL rule that is missing, instead of failing every read.
func (s *Server) syncOrDegrade(ctx context.Context) error {
	err := s.sync(ctx)
	if errors.Is(err, errNoSync) && ctx.Err() == nil && s.client.IsConnectionOpen() {
		s.obs.unsynced.Store(true)
		s.log.Error("the controller cannot read its own sync topic; allow it (Mosquitto: pattern read fencegate/v1/replies/%c/#), until then retained grants are taken as read when their subscription is acknowledged",
			"topic", s.obs.topic, "err", err)
		return nil
	}
	return err
}

var errNoSync = errors.New("the sync message did not come back")

// sync publishes a message to the server's own sync topic and waits until
// it comes back: paho hands messages to the callbacks in order, so every
// message the broker sent before (retained ones of earlier subscriptions)
// has been handled by then.
func (s *Server) sync(ctx context.Context) error {
	s.obs.mu.Lock()
	s.obs.next++
	id := s.obs.nonce + "-" + strconv.FormatUint(s.obs.next, 10)
	ch := make(chan struct{})
	s.obs.syncs[id] = ch
	s.obs.mu.Unlock()
	defer func() { s.obs.mu.Lock(); delete(s.obs.syncs, id); s.obs.mu.Unlock() }()
	if err := waitToken(ctx, s.client.Publish(s.obs.topic, 1, false, []byte(id))); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	t := time.NewTimer(publishTimeout)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sync: %w", ctx.Err())
	case <-t.C:
		return fmt.Errorf("sync on %s: %w in %v", s.obs.topic, errNoSync, publishTimeout)
	}
}

// onSync is the paho callback of the sync topic.
func (s *Server) onSync(_ paho.Client, m paho.Message) {
	s.obs.mu.Lock()
	defer s.obs.mu.Unlock()
	if ch, ok := s.obs.syncs[string(m.Payload())]; ok {
		close(ch)
		delete(s.obs.syncs, string(m.Payload()))
	}
}

// onDeviceState is the paho callback of the device states: it keeps, per
// domain, the highest fence position the agents report (the highest epoch
// for all domains from a state that names none).
func (s *Server) onDeviceState(_ paho.Client, m paho.Message) {
	var st protocol.DeviceState
	if json.Unmarshal(m.Payload(), &st) != nil || st.Fence == nil {
		return
	}
	p := position{st.Fence.Epoch, st.Fence.Seq}
	s.obs.mu.Lock()
	defer s.obs.mu.Unlock()
	switch {
	case st.Domain == "":
		s.obs.deviceEpoch = max(s.obs.deviceEpoch, p.epoch)
	case p.above(s.obs.domainFence[st.Domain]):
		s.obs.domainFence[st.Domain] = p
	}
}

// waitToken waits for a paho token, bounded by ctx and publishTimeout.
func waitToken(ctx context.Context, tok paho.Token) error {
	t := time.NewTimer(publishTimeout)
	defer t.Stop()
	select {
	case <-tok.Done():
		return tok.Error()
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("mqtt: no answer from the broker in %v", publishTimeout)
	}
}

// position returns the epoch and seq of domain's newest known grant; 0, 0
// if none.
func (p *publisher) position(domain string) (epoch, seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.latest[domain]
	return t.Epoch, t.Seq
}
