package mqttapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// retryInterval is how long the publisher waits after a failed publish.
const retryInterval = time.Second

// publisher keeps the newest grant of every domain and publishes it
// retained, from one goroutine, so an older grant never overwrites a newer
// one on the broker.
type publisher struct {
	client paho.Client
	topics protocol.Topics
	log    *slog.Logger
	wake   chan struct{} // buffered 1: there is pending work

	mu      sync.Mutex // guards latest and pending
	latest  map[string]fence.Token
	pending map[string]bool
}

func newPublisher(c paho.Client, t protocol.Topics, log *slog.Logger) *publisher {
	return &publisher{client: c, topics: t, log: log, wake: make(chan struct{}, 1),
		latest: make(map[string]fence.Token), pending: make(map[string]bool)}
}

// announce records t if it is the newest of its domain and wakes run.
func (p *publisher) announce(t fence.Token) {
	p.mu.Lock()
	old, ok := p.latest[t.Domain]
	newer := !ok || fence.ComparePosition(t.Epoch, t.Seq, old.Epoch, old.Seq) > 0 ||
		(t.SameLease(old) && t.Raw != old.Raw) // re-signed by a rotated key
	if newer {
		p.latest[t.Domain] = t
		p.pending[t.Domain] = true
	}
	p.mu.Unlock()
	if newer {
		p.signal()
	}
}

// observe takes a grant announcement seen on the broker (this server's own,
// another replica's, or anyone's). A verified token newer than the one we
// know is adopted, so we never publish an older one over it. Anything else
// — an older token, an unverifiable one, garbage — is overwritten with the
// newest token we know: the retained grant always converges to the newest.
// ok is false for an announcement that did not verify.
func (p *publisher) observe(domain string, t fence.Token, ok bool) {
	p.mu.Lock()
	ours, known := p.latest[domain]
	var heal bool
	switch {
	case ok && (!known || fence.ComparePosition(t.Epoch, t.Seq, ours.Epoch, ours.Seq) > 0):
		p.latest[domain] = t
		delete(p.pending, domain)
	case known && (!ok || t.Raw != ours.Raw):
		p.pending[domain] = true
		heal = true
	}
	p.mu.Unlock()
	if heal {
		p.signal()
	}
}

// domains lists the domains with a known grant.
func (p *publisher) domains() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.latest))
	for d := range p.latest {
		out = append(out, d)
	}
	return out
}

// republishAll marks every known domain for publication again.
func (p *publisher) republishAll() {
	p.mu.Lock()
	for d := range p.latest {
		p.pending[d] = true
	}
	p.mu.Unlock()
	p.signal()
}

func (p *publisher) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run publishes pending grants until ctx ends; it calls wg.Done on return.
func (p *publisher) run(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-p.wake:
		case <-ctx.Done():
			return
		}
		if !p.flush() {
			select { // wait before retrying, but stay stoppable
			case <-time.After(retryInterval):
				p.signal()
			case <-ctx.Done():
				return
			}
		}
	}
}

// flush publishes every pending grant and reports whether all succeeded;
// failed ones stay pending. While the client is not connected it leaves
// them pending (a publish queued before the connection completes can hang
// in paho); the connection's republishAll wakes it again.
func (p *publisher) flush() bool {
	if !p.client.IsConnectionOpen() {
		return true
	}
	ok := true
	for _, t := range p.take() {
		if err := p.publish(t); err != nil {
			p.log.Warn("publish grant failed", "domain", t.Domain, "err", err)
			p.requeue(t)
			ok = false
		}
	}
	return ok
}

func (p *publisher) take() []fence.Token {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]fence.Token, 0, len(p.pending))
	for d := range p.pending {
		out = append(out, p.latest[d])
	}
	clear(p.pending)
	return out
}

// requeue marks t's domain pending again unless a newer grant already is.
func (p *publisher) requeue(t fence.Token) {
	p.mu.Lock()
	if p.latest[t.Domain].Raw == t.Raw {
		p.pending[t.Domain] = true
	}
	p.mu.Unlock()
}

func (p *publisher) publish(t fence.Token) error {
	payload, err := json.Marshal(struct {
		Token string `json:"token"`
	}{t.Raw})
	if err != nil {
		return err
	}
	return mqtt.Wait(p.client.Publish(p.topics.LeaseGrant(t.Domain), 1, true, payload), publishTimeout)
}
