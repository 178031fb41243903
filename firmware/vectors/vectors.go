package vectors

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fence/fencetest"
)

// Seeds of the keys (fencetest.Key): the ring trusts TrustedSeeds;
// UntrustedSeed signs tokens whose key the ring does not know.
var TrustedSeeds = []byte{0, 1}

// UntrustedSeed is the seed of a key no vector ring trusts.
const UntrustedSeed byte = 2

// Files are the names Write creates in its directory.
var Files = []string{"tokens.txt", "mutations.txt", "positions.txt", "fence.txt"}

// Write generates every vector file into dir (which must exist),
// replacing files of the same names.
func Write(dir string) error {
	g, err := newGen()
	if err != nil {
		return err
	}
	files := map[string]func() (string, error){
		"tokens.txt": g.tokensFile, "mutations.txt": g.mutationsFile,
		"positions.txt": g.positionsFile, "fence.txt": g.fenceFile,
	}
	for _, name := range Files {
		text, err := files[name]()
		if err != nil {
			return fmt.Errorf("vectors: %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return fmt.Errorf("vectors: %w", err)
		}
	}
	return nil
}

// gen holds the keys every file is generated with.
type gen struct {
	signers   []*fence.Signer // trusted, by index of TrustedSeeds
	untrusted *fence.Signer
	ring      *fence.KeyRing
}

func newGen() (*gen, error) {
	g := &gen{}
	var pubs []ed25519.PublicKey
	for _, seed := range TrustedSeeds {
		s, err := fence.NewSigner(fencetest.Key(seed))
		if err != nil {
			return nil, fmt.Errorf("vectors: %w", err)
		}
		g.signers = append(g.signers, s)
		pubs = append(pubs, s.Public())
	}
	var err error
	if g.untrusted, err = fence.NewSigner(fencetest.Key(UntrustedSeed)); err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	// A cache of one entry: every answer is a fresh verification.
	if g.ring, err = fence.NewKeyRing(1, pubs...); err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	return g, nil
}

// sign signs tok with the trusted signer i.
func (g *gen) sign(i int, tok fence.Token) (fence.Token, error) {
	t, err := g.signers[i].Sign(tok)
	if err != nil {
		return fence.Token{}, fmt.Errorf("vectors: %w", err)
	}
	return t, nil
}

// ringLines are the "key" lines of the trusted ring.
func (g *gen) ringLines() string {
	var b strings.Builder
	for _, s := range g.signers {
		id := s.KeyID()
		fmt.Fprintf(&b, "key %s %s\n", hex.EncodeToString(id[:]), hex.EncodeToString(s.Public()))
	}
	return b.String()
}

// reasons maps each sentinel to its name in docs/protocol.md (with
// underscores) and its one-letter code in mutations.txt.
var reasons = []struct {
	err  error
	name string
	code byte
}{
	{fence.ErrOversize, "oversize", 'z'}, {fence.ErrPrefix, "prefix", 'p'}, {fence.ErrBase64, "base64", 'b'},
	{fence.ErrTruncated, "truncated", 't'}, {fence.ErrTrailing, "trailing", 'r'}, {fence.ErrVersion, "version", 'v'},
	{fence.ErrInvalidID, "invalid_id", 'i'}, {fence.ErrInvalidField, "invalid_field", 'f'},
	{fence.ErrUnknownKey, "unknown_key", 'k'}, {fence.ErrSignature, "signature", 's'},
	{fence.ErrDomainMismatch, "domain_mismatch", 'd'},
}

// reasonOf returns the name and code of err: "ok"/'o' for nil.
func reasonOf(err error) (string, byte, error) {
	if err == nil {
		return "ok", 'o', nil
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.name, r.code, nil
		}
	}
	return "", 0, fmt.Errorf("vectors: %w is none of the protocol's reasons", err)
}

// answer is Go's answer for one wire form: Verify's and ParseUnverified's.
type answer struct {
	verify, parse error
	tok           fence.Token // ParseUnverified's token when parse is nil
}

func (g *gen) answer(wire string) answer {
	_, verr := g.ring.Verify(wire)
	tok, perr := fence.ParseUnverified(wire)
	return answer{verify: verr, parse: perr, tok: tok}
}
