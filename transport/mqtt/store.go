package mqtt

import (
	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// copyingStore is paho's in-memory store, except that it keeps its own
// copy of every PUBLISH it is given.
//
// paho 1.5.1 stores a QoS 1 PUBLISH and queues the same packet for the
// connection's writer. When the connection drops before the writer took
// it, the reconnection's resume marks the stored packet a duplicate
// (Dup = true) and queues it again, while the new connection's writer
// takes the first queued copy — the same packet — and encodes it: a data
// race on that packet. Put runs in Publish before the packet is queued,
// so the copy made there is never shared, and nobody but Get reads it;
// Get (called only by resume) hands out a fresh copy each time, so
// neither the queued original nor the packet an earlier resume queued is
// the one a later resume marks. The copies are shallow: the payload is
// shared, and nothing writes it.
type copyingStore struct {
	*paho.MemoryStore
}

func newCopyingStore() copyingStore { return copyingStore{paho.NewMemoryStore()} }

// Put stores m, a PUBLISH as a copy of its own.
func (s copyingStore) Put(key string, m packets.ControlPacket) {
	if p, ok := m.(*packets.PublishPacket); ok {
		cp := *p
		m = &cp
	}
	s.MemoryStore.Put(key, m)
}

// Get returns a fresh copy of the PUBLISH stored under key (other
// packets as stored), or nil.
func (s copyingStore) Get(key string) packets.ControlPacket {
	m := s.MemoryStore.Get(key)
	if p, ok := m.(*packets.PublishPacket); ok {
		cp := *p
		return &cp
	}
	return m
}
