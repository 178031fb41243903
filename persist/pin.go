package persist

import "sync"

// pins keeps the journal records of commands in flight that a retry is
// waiting on: Accept pins a record when it decides a retry Duplicate while
// the original is still accepted (the agent answers that retry once the
// original completes, from the journal), and pruning keeps a pinned record
// until Unpin. Without it a small retention could prune the record in the
// very commit that writes its result, and the retry would get in_doubt for
// a command that was applied and answered.
type pins struct {
	mu sync.Mutex // guards n
	n  map[string]int
}

func (p *pins) pin(device, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = make(map[string]int)
	}
	p.n[pinKey(device, id)]++
}

func (p *pins) unpin(device, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := pinKey(device, id)
	if p.n[k]--; p.n[k] <= 0 {
		delete(p.n, k)
	}
}

// pinned is asked by every prune walk; with no retry waiting (the usual
// case) it builds no key.
func (p *pins) pinned(device, id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.n) > 0 && p.n[pinKey(device, id)] > 0
}

// pinKey is "device NUL id", as the journal's keys (ids never hold NUL).
func pinKey(device, id string) string { return device + "\x00" + id }

// Unpin releases the pin Accept took with a Duplicate decision on a
// command still accepted (Decision.Record.State is StateAccepted): call it
// once per such decision, after reading the result with Lookup. Until then
// pruning keeps the command's record. Pins live in memory only; a restart
// drops them with the retries that held them.
func (s *Store) Unpin(device, id string) { s.pins.unpin(device, id) }
