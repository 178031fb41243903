package agent

import (
	"crypto/ed25519"
	"fmt"

	"github.com/fencegate/fencegate/fence"
)

// ReloadTrust makes the agent trust exactly the public keys in paths (a
// reloaded trust.keys): it reads them all first — on any error nothing
// changes — then adds the new keys and last removes the keys no longer
// listed. A removed key's tokens are refused from then on, cached
// verifications included (fence.KeyRing.Remove); fences already raised
// by them stay. It returns the key ids added and removed. Safe to call
// while the agent runs, from any goroutine.
func (a *Agent) ReloadTrust(paths []string) (added, removed []fence.KeyID, err error) {
	if len(paths) == 0 {
		return nil, nil, fmt.Errorf("trust.keys: at least one controller public key file is required")
	}
	want := map[fence.KeyID]ed25519.PublicKey{}
	for i, p := range paths {
		pub, err := fence.LoadPublicKey(p)
		if err != nil {
			return nil, nil, fmt.Errorf("trust.keys[%d]: %w", i, err)
		}
		want[fence.KeyIDOf(pub)] = pub
	}
	ring := a.env.keys
	have := map[fence.KeyID]bool{}
	for _, id := range ring.KeyIDs() {
		have[id] = true
	}
	for id, pub := range want {
		if !have[id] {
			if err := ring.Add(pub); err != nil {
				return added, nil, fmt.Errorf("trust.keys: %w", err)
			}
			added = append(added, id)
		}
	}
	for id := range have {
		if _, keep := want[id]; !keep {
			ring.Remove(id)
			removed = append(removed, id)
		}
	}
	return added, removed, nil
}

// TrustedKeys are the ids of the keys the agent trusts now.
func (a *Agent) TrustedKeys() []fence.KeyID { return a.env.keys.KeyIDs() }
