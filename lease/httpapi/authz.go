package httpapi

import (
	"errors"
	"fmt"
	"path"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// Rule allows one client identity (a certificate's common name or a
// bearer token's name) some domains and holder names.
type Rule struct {
	// Identity is the client identity the rule is for.
	Identity string `yaml:"identity"`
	// Domains are path.Match patterns of the domains it may use.
	Domains []string `yaml:"domains"`
	// Holders are path.Match patterns of the holder names it may acquire
	// as; empty means exactly its identity.
	Holders []string `yaml:"holders"`
}

// Policy decides which identity may use which domains (and, to acquire,
// under which holder name). An empty Policy allows everything; a
// non-empty one denies what no rule allows, and an unauthenticated
// request everything. Read-only once in use.
type Policy []Rule

// Validate checks every pattern; errors name the key under prefix
// ("authz") and the value.
func (p Policy) Validate(prefix string) error {
	seen := map[string]int{}
	for i, r := range p {
		key := fmt.Sprintf("%s[%d]", prefix, i)
		if r.Identity == "" {
			return fmt.Errorf("%s.identity: missing", key)
		}
		if j, dup := seen[r.Identity]; dup {
			return fmt.Errorf("%s.identity: %q is already %s[%d]", key, r.Identity, prefix, j)
		}
		seen[r.Identity] = i
		if len(r.Domains) == 0 {
			return fmt.Errorf("%s.domains: at least one pattern is required", key)
		}
		if err := checkPatterns(key, r); err != nil {
			return err
		}
	}
	return nil
}

func checkPatterns(key string, r Rule) error {
	for field, pats := range map[string][]string{"domains": r.Domains, "holders": r.Holders} {
		for j, pat := range pats {
			if _, err := path.Match(pat, ""); err != nil {
				return fmt.Errorf("%s.%s[%d]: %q is not a glob pattern: %w", key, field, j, pat, err)
			}
		}
	}
	return nil
}

// Refusals of Allow; both wrap no other error.
var (
	// errDomainDenied: the identity may not use the domain (not_holder).
	errDomainDenied = errors.New("domain not allowed")
	// errHolderDenied: the holder name is not the identity's (bad_request).
	errHolderDenied = errors.New("holder not allowed")
)

// Allow decides whether identity (authenticated: ok) may do op on domain
// with req: the domain must match one of its rule's patterns; an acquire's
// holder, and the holder of the token a renew or release carries, must
// match its holder patterns.
func (p Policy) Allow(identity string, ok bool, op protocol.LeaseOp, domain string, req protocol.Request) error {
	if len(p) == 0 {
		return nil
	}
	r, found := p.rule(identity)
	switch {
	case !ok:
		return fmt.Errorf("%w: request is not authenticated", errDomainDenied)
	case !found || !matchAny(r.Domains, domain):
		return fmt.Errorf("%w: identity %q may not use domain %q", errDomainDenied, identity, domain)
	}
	holder := req.Holder
	if op == protocol.OpRenew || op == protocol.OpRelease {
		if t, err := fence.ParseUnverified(req.Token); err == nil {
			holder = t.Holder // the controller verifies the token itself
		}
	}
	if holder != "" && !r.holderAllowed(holder) {
		return fmt.Errorf("%w: identity %q may not act as holder %q", errHolderDenied, identity, holder)
	}
	return nil
}

func (p Policy) rule(identity string) (Rule, bool) {
	for _, r := range p {
		if r.Identity == identity {
			return r, true
		}
	}
	return Rule{}, false
}

func (r Rule) holderAllowed(holder string) bool {
	if len(r.Holders) == 0 {
		return holder == r.Identity
	}
	return matchAny(r.Holders, holder)
}

func matchAny(patterns []string, s string) bool {
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, s); ok {
			return true
		}
	}
	return false
}

// refusal is the response to a request the policy refuses.
func refusal(err error) protocol.Response {
	code := protocol.CodeNotHolder
	if errors.Is(err, errHolderDenied) {
		code = protocol.CodeBadRequest
	}
	return protocol.Response{Code: code, Message: err.Error()}
}
