package mqtt

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// TestCopyingStoreKeepsItsOwnPublish: what resume does to a stored
// PUBLISH (mark it a duplicate) does not reach the packet Put was given,
// which paho has queued for the writer too.
func TestCopyingStoreKeepsItsOwnPublish(t *testing.T) {
	s := newCopyingStore()
	s.Open()
	defer s.Close()
	p := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
	p.Qos, p.MessageID, p.TopicName, p.Payload = 1, 7, "t/x", []byte("payload")
	s.Put("o.7", p)
	got, ok := s.Get("o.7").(*packets.PublishPacket)
	if !ok {
		t.Fatalf("Get returned %T, want the stored PUBLISH", s.Get("o.7"))
	}
	if got == p {
		t.Fatal("Get returned the packet given to Put, not the store's own copy")
	}
	if got.MessageID != 7 || got.TopicName != "t/x" || string(got.Payload) != "payload" || got.Qos != 1 {
		t.Fatalf("stored copy %+v differs from what was put", got)
	}
	got.Dup = true
	if p.Dup {
		t.Fatal("marking the stored copy a duplicate marked the queued packet too")
	}
	again := s.Get("o.7").(*packets.PublishPacket)
	if again == got || again.Dup {
		t.Fatal("a second resume got the packet the first one marked and queued")
	}
	sub := packets.NewControlPacket(packets.Subscribe).(*packets.SubscribePacket)
	sub.MessageID = 8
	s.Put("o.8", sub)
	if s.Get("o.8") != sub {
		t.Fatal("a SUBSCRIBE was not stored as given")
	}
}

// TestPublishesAcrossKicks: QoS 1 publishes from several goroutines go
// on while the broker drops the connection again and again; each one
// queued when a connection died is resent by resume while the next
// connection's writer may take the queued original. Under -race this
// failed with paho's own store (resume's Dup write against the writer's
// encode of the same packet); every publish must also reach the broker.
func TestPublishesAcrossKicks(t *testing.T) {
	b := startBroker(t, "127.0.0.1:0")
	h, got := collectAll()
	sink, err := Dial(dialCtx(t), Config{Broker: b.URL(), ClientID: "sink"}, map[string]paho.MessageHandler{"kick/#": h})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Disconnect(100)
	subscribed := make(chan error, 64)
	c, err := Dialer{Config: Config{Broker: b.URL(), ClientID: "publisher", MaxReconnectInterval: 50 * time.Millisecond},
		OnSubscribed: func(_ paho.Client, err error) { subscribed <- err }}.Dial(dialCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(100)
	awaitSubscribed(t, subscribed)

	var stop atomic.Bool
	var sent sync.Map // payload -> struct{}, every publish paho acknowledged
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				payload := fmt.Sprintf("%d-%d", g, i)
				tok := c.Publish("kick/"+payload, 1, false, payload)
				if tok.WaitTimeout(waitEvent) && tok.Error() == nil {
					sent.Store(payload, struct{}{})
				}
			}
		}()
	}
	for range 8 {
		time.Sleep(30 * time.Millisecond)
		kick(t, b, "publisher")
		awaitSubscribed(t, subscribed)
	}
	stop.Store(true)
	wg.Wait()
	n := 0
	sent.Range(func(k, _ any) bool {
		n++
		if !got.await(k.(string), waitEvent) {
			t.Errorf("publish %s was acknowledged but never reached the broker's subscriber", k)
		}
		return true
	})
	if n == 0 {
		t.Fatal("no publish was acknowledged")
	}
}

// received is every payload a handler saw.
type received struct {
	mu   sync.Mutex
	seen map[string]bool
}

func collectAll() (paho.MessageHandler, *received) {
	r := &received{seen: map[string]bool{}}
	return func(_ paho.Client, m paho.Message) {
		r.mu.Lock()
		r.seen[string(m.Payload())] = true
		r.mu.Unlock()
	}, r
}

// await reports whether payload arrives within d.
func (r *received) await(payload string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !r.has(payload) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

func (r *received) has(payload string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[payload]
}
