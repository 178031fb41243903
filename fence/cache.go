package fence

import "sync"

// verifiedCache remembers tokens whose signature verified, keyed by their full
// wire form. It holds at most size entries; when full, it evicts the oldest
// insertion (a ring of keys), which is cheap and good enough for the workload:
// a few live leases per domain, each reused for many commands.
type verifiedCache struct {
	mu      sync.Mutex // guards entries, order and next
	entries map[string]Token
	order   []string // ring of keys in insertion order
	next    int      // index in order of the next slot to fill or evict
}

func newVerifiedCache(size int) *verifiedCache {
	return &verifiedCache{entries: make(map[string]Token, size), order: make([]string, size)}
}

func (c *verifiedCache) get(s string) (Token, bool) {
	c.mu.Lock()
	t, ok := c.entries[s]
	c.mu.Unlock()
	return t, ok
}

func (c *verifiedCache) put(s string, t Token) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[s]; ok {
		return
	}
	if old := c.order[c.next]; old != "" {
		delete(c.entries, old)
	}
	c.order[c.next] = s
	c.entries[s] = t
	c.next = (c.next + 1) % len(c.order)
}

func (c *verifiedCache) clear() {
	c.mu.Lock()
	clear(c.entries)
	clear(c.order)
	c.next = 0
	c.mu.Unlock()
}

func (c *verifiedCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
