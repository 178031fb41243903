package fence

import (
	"crypto/ed25519"
	"fmt"
	"sync"
)

// DefaultCacheSize is the number of verified tokens a KeyRing remembers when
// NewKeyRing is given no size.
const DefaultCacheSize = 4096

// KeyRing verifies tokens against a set of trusted public keys, so keys can
// rotate: trust the new key, start signing with it, then drop the old one.
// Successful verifications are cached by wire form, bounded in size. All
// methods are safe for concurrent use.
type KeyRing struct {
	mu    sync.RWMutex // guards keys; the cache has its own lock
	keys  map[KeyID]ed25519.PublicKey
	cache *verifiedCache
}

// NewKeyRing returns a key ring trusting keys, remembering up to cacheSize
// verified tokens (DefaultCacheSize if cacheSize <= 0).
func NewKeyRing(cacheSize int, keys ...ed25519.PublicKey) (*KeyRing, error) {
	if cacheSize <= 0 {
		cacheSize = DefaultCacheSize
	}
	r := &KeyRing{keys: make(map[KeyID]ed25519.PublicKey), cache: newVerifiedCache(cacheSize)}
	for _, k := range keys {
		if err := r.Add(k); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Add trusts pub. Adding a key already trusted does nothing.
func (r *KeyRing) Add(pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: public key is %d bytes, want %d", ErrKeyFile, len(pub), ed25519.PublicKeySize)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys[KeyIDOf(pub)] = append(ed25519.PublicKey(nil), pub...)
	return nil
}

// Remove stops trusting the key with id. Tokens it signed stop verifying at
// once: the cache is emptied.
func (r *KeyRing) Remove(id KeyID) {
	r.mu.Lock()
	delete(r.keys, id)
	r.cache.clear()
	r.mu.Unlock()
}

// Trusts reports whether the key with id is trusted now.
func (r *KeyRing) Trusts(id KeyID) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.keys[id]
	return ok
}

// KeyIDs returns the ids of the trusted keys, in no particular order.
func (r *KeyRing) KeyIDs() []KeyID {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ids := make([]KeyID, 0, len(r.keys))
	for id := range r.keys {
		ids = append(ids, id)
	}
	return ids
}

// Verify decodes the wire-form token s and checks its signature with the
// trusted key it names. It returns the token (with Raw set) or an error
// wrapping one of the package's sentinels. A token verified before, and whose
// key is still trusted, is answered from the cache without a signature check.
func (r *KeyRing) Verify(s string) (Token, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if t, ok := r.cache.get(s); ok {
		return t, nil
	}
	t, err := r.verifySlow(s)
	if err != nil {
		return Token{}, err
	}
	r.cache.put(s, t)
	return t, nil
}

// verifySlow decodes and checks s; r.mu must be held for reading.
func (r *KeyRing) verifySlow(s string) (Token, error) {
	body, sig, err := splitWire(s)
	if err != nil {
		return Token{}, err
	}
	t, err := decodeBody(body)
	if err != nil {
		return Token{}, err
	}
	pub, ok := r.keys[t.KeyID]
	if !ok {
		return Token{}, fmt.Errorf("%w: %s", ErrUnknownKey, t.KeyID)
	}
	if !ed25519.Verify(pub, signedMessage(body), sig) {
		return Token{}, ErrSignature
	}
	t.Raw = s
	return t, nil
}
