package lease

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// Defaults of Config.
const (
	// DefaultMaxWaiters bounds concurrent waiting acquires.
	DefaultMaxWaiters = 1024
	// DefaultMaxDomains bounds the domains in memory.
	DefaultMaxDomains = 10000
)

// With a Shared store: how often a waiting acquire re-reads the domain (a
// release on another replica wakes no local waiter), and how often an
// operation that lost a compare-and-put race is retried.
const (
	SharedPoll         = 250 * time.Millisecond
	MaxConflictRetries = 8
)

// Config configures a Controller. Store and Signer are required; zero
// values of the other fields mean defaults.
type Config struct {
	// Store keeps the epoch and the domain records. The controller does not
	// close it.
	Store Store
	// Signer mints tokens with the controller's current key.
	Signer *fence.Signer
	// Trusted are further public keys whose tokens renew and release accept,
	// e.g. the previous key during a rotation. The Signer's key is always
	// trusted.
	Trusted []ed25519.PublicKey
	// Clock is the time source. Default SystemClock.
	Clock Clock
	// Logger receives internal errors. Default: discard.
	Logger *slog.Logger
	// Observer, if set, is told the outcome and duration of every operation.
	Observer Observer
	// OnGrant, if set, is called with every new token after it is durable,
	// from the granting goroutine, with no controller lock held. Calls for
	// one domain may run concurrently and arrive out of order: the receiver
	// orders them by token.
	OnGrant func(t fence.Token)
	// MaxWaiters bounds acquires waiting for a held domain at once; an
	// acquire over the bound is answered held at once. Default 1024.
	MaxWaiters int
	// Domains are the domain names the controller serves, as path.Match
	// glob patterns ("press-*", "line[0-9]"); a request for any other
	// domain is answered bad_request. Empty: every valid name.
	Domains []string
	// EpochFloor, if set, reports positions seen outside the store; a
	// grant whose token would not sort above them is refused with
	// ErrEpochBehind (answered internal, with a message naming
	// `controller epoch-bump`). The MQTT API implements it.
	EpochFloor EpochFloor
	// MaxDomains bounds the domains held in memory: those with a live
	// lease, a waiting acquire or an operation under way. Idle domains
	// leave memory (their store record stays). An acquire that would
	// bring a new domain in beyond the bound is answered busy. Default
	// 10000.
	MaxDomains int
}

// Observer receives the outcome of every operation. It is called
// concurrently, with no controller lock held, and must not block.
type Observer interface {
	Observe(op protocol.LeaseOp, code protocol.Code, took time.Duration)
}

// Controller grants, renews and releases leases. Its methods are safe for
// concurrent use; operations on one domain are serialized, operations on
// different domains run concurrently and share store commits. It starts no
// goroutines: a waiting acquire waits in its caller's goroutine.
type Controller struct {
	store      Store
	signer     *fence.Signer
	keys       *fence.KeyRing
	clock      Clock
	log        *slog.Logger
	obs        Observer
	onGrant    func(fence.Token)
	trusted    []ed25519.PublicKey // signing key first
	epoch      uint64
	started    time.Time     // leases found in the store run from here
	waiters    chan struct{} // semaphore of waiting acquires
	shared     bool          // the store is Shared: re-read records, store renewals
	poll       time.Duration // how often a waiting acquire re-reads a shared record; 0: never
	allow      []string      // Config.Domains
	floor      EpochFloor    // Config.EpochFloor; nil: the store alone
	maxDomains int

	mu      sync.Mutex // guards domains and every domain's refs
	domains map[string]*domain
}

// New reads the store's epoch and returns a Controller.
func New(ctx context.Context, cfg Config) (*Controller, error) {
	if cfg.Store == nil || cfg.Signer == nil {
		return nil, fmt.Errorf("%w: Store and Signer are required", ErrConfig)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	trusted := append([]ed25519.PublicKey{cfg.Signer.Public()}, cfg.Trusted...)
	keys, err := fence.NewKeyRing(0, trusted...)
	if err != nil {
		return nil, fmt.Errorf("new controller: %w", err)
	}
	epoch, err := cfg.Store.Epoch(ctx)
	if err != nil {
		return nil, fmt.Errorf("new controller: %w", err)
	}
	c := &Controller{
		store: cfg.Store, signer: cfg.Signer, keys: keys, trusted: trusted, clock: cfg.Clock, log: cfg.Logger,
		obs: cfg.Observer, onGrant: cfg.OnGrant, epoch: epoch, started: cfg.Clock.Now(),
		waiters: make(chan struct{}, cfg.MaxWaiters), domains: make(map[string]*domain),
		allow: cfg.Domains, maxDomains: cfg.MaxDomains, floor: cfg.EpochFloor,
	}
	if isShared(cfg.Store) {
		c.shared, c.poll = true, SharedPoll
	}
	return c, nil
}

// validate checks the fields New does not default.
func (cfg Config) validate() error {
	switch {
	case cfg.MaxWaiters < 0:
		return fmt.Errorf("%w: MaxWaiters %d is negative", ErrConfig, cfg.MaxWaiters)
	case cfg.MaxDomains < 0:
		return fmt.Errorf("%w: MaxDomains %d is negative", ErrConfig, cfg.MaxDomains)
	}
	return CheckDomainPatterns(cfg.Domains)
}

// CheckDomainPatterns returns nil if every pattern is a valid path.Match
// pattern, else an error wrapping ErrConfig naming the first bad one.
func CheckDomainPatterns(patterns []string) error {
	for i, p := range patterns {
		if _, err := path.Match(p, ""); err != nil || p == "" || strings.Contains(p, "/") {
			return fmt.Errorf("%w: domain pattern %d %q is not a glob pattern of domain names", ErrConfig, i, p)
		}
	}
	return nil
}

// allowed reports whether Config.Domains lets the controller serve name.
func (c *Controller) allowed(name string) bool {
	if len(c.allow) == 0 {
		return true
	}
	for _, p := range c.allow {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

func (cfg Config) withDefaults() Config {
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxWaiters == 0 {
		cfg.MaxWaiters = DefaultMaxWaiters
	}
	if cfg.MaxDomains == 0 {
		cfg.MaxDomains = DefaultMaxDomains
	}
	return cfg
}

// Epoch returns the epoch of the tokens this controller mints.
func (c *Controller) Epoch() uint64 { return c.epoch }

// VerifyToken checks a token's signature against the controller's trusted
// keys (mqttapi.TokenVerifier). Safe for concurrent use.
func (c *Controller) VerifyToken(raw string) (fence.Token, error) { return c.keys.Verify(raw) }

// Keys returns the public keys the controller trusts, the signing key first.
func (c *Controller) Keys() []ed25519.PublicKey {
	return append([]ed25519.PublicKey(nil), c.trusted...)
}

// Do validates req for op on domain, runs it and returns the response.
// It never fails: bad input is CodeBadRequest, a store failure
// CodeInternal (and a log line). ctx bounds an acquire's wait and the wait
// for room in the store's queue.
func (c *Controller) Do(ctx context.Context, op protocol.LeaseOp, domain string, req protocol.Request) protocol.Response {
	start := c.clock.Now()
	resp := c.do(ctx, op, domain, req)
	resp.RequestID = req.RequestID
	if c.obs != nil {
		c.obs.Observe(op, resp.Code, c.clock.Now().Sub(start))
	}
	return resp
}

func (c *Controller) do(ctx context.Context, op protocol.LeaseOp, domain string, req protocol.Request) protocol.Response {
	if err := fence.CheckID("domain", domain); err != nil {
		return BadRequest(fmt.Errorf("%w: %w", ErrBadRequest, err))
	}
	if !c.allowed(domain) {
		return BadRequest(fmt.Errorf("%w: domain %q is not served here (domains: %s)", ErrBadRequest, domain, strings.Join(c.allow, ", ")))
	}
	if err := req.Validate(op); err != nil {
		return BadRequest(err)
	}
	resp, err := c.run(ctx, op, domain, req)
	switch {
	case errors.Is(err, ErrBadRequest):
		return BadRequest(err)
	case errors.Is(err, ErrBusy):
		return protocol.Response{Code: protocol.CodeBusy, Message: err.Error()}
	case errors.Is(err, ErrEpochBehind):
		c.log.Error("grant refused", "op", op, "domain", domain, "err", err)
		return protocol.Response{Code: protocol.CodeInternal, Message: err.Error()}
	}
	if err != nil {
		c.log.Error("lease operation failed", "op", op, "domain", domain, "err", err)
		return protocol.Response{Code: protocol.CodeInternal, Message: "internal error"}
	}
	return resp
}

// run runs op, again against the fresh record after losing a
// compare-and-put race (only a Shared store's replicas race), at most
// MaxConflictRetries times more. A waiting acquire that lost a race waits
// anew.
func (c *Controller) run(ctx context.Context, op protocol.LeaseOp, domain string, req protocol.Request) (protocol.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := c.runOnce(ctx, op, domain, req)
		if !errors.Is(err, ErrConflict) || attempt >= MaxConflictRetries {
			return resp, err
		}
	}
}

func (c *Controller) runOnce(ctx context.Context, op protocol.LeaseOp, domain string, req protocol.Request) (protocol.Response, error) {
	var resp protocol.Response
	var err error
	switch op {
	case protocol.OpAcquire:
		resp, err = c.acquire(ctx, domain, req)
	case protocol.OpRenew:
		resp, err = c.renew(ctx, domain, req)
	case protocol.OpRelease:
		resp, err = c.release(ctx, domain, req)
	default:
		resp, err = c.get(ctx, domain)
	}
	return resp, err
}

// BadRequest is the response to a request rejected with err.
func BadRequest(err error) protocol.Response {
	return protocol.Response{Code: protocol.CodeBadRequest, Message: err.Error()}
}

// Domains counts the domains held in memory (see Config.MaxDomains).
func (c *Controller) Domains() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.domains)
}

// ActiveLeases counts the domains with a live lease. Domains busy in a
// store write are counted as they were before it.
func (c *Controller) ActiveLeases() int {
	c.mu.Lock()
	ds := make([]*domain, 0, len(c.domains))
	for _, d := range c.domains {
		ds = append(ds, d)
	}
	c.mu.Unlock()
	now := c.clock.Now()
	n := 0
	for _, d := range ds {
		if d.liveAt(now) {
			n++
		}
	}
	return n
}
