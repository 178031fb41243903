// Package benchgrant drives a lease controller for the bench commands:
// every operation is a durable grant (a token signed, its record committed
// to the store) that supersedes the last one of its domain.
package benchgrant

import (
	"context"
	"fmt"
	"strconv"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/protocol"
)

// Load is a lease controller on a store, with a fresh signing key.
type Load struct{ ctrl *lease.Controller }

// New returns a Load on st, which the caller closes after the Load's last
// operation.
func New(ctx context.Context, st lease.Store) (*Load, error) {
	priv, err := fence.GenerateKey()
	if err != nil {
		return nil, err
	}
	signer, err := fence.NewSigner(priv)
	if err != nil {
		return nil, err
	}
	ctrl, err := lease.New(ctx, lease.Config{Store: st, Signer: signer})
	if err != nil {
		return nil, err
	}
	return &Load{ctrl: ctrl}, nil
}

// Domain is the fencing domain of device dev of a load.
func Domain(dev int) string { return "bench-grant-" + strconv.Itoa(dev) }

// Op is a benchload.Op: device dev acquires its own domain under request
// id i. The holder is the same every time, so each call is granted at once
// and mints a new token above the last.
func (l *Load) Op(ctx context.Context, dev, i int) error {
	req := protocol.Request{RequestID: "grant-" + strconv.Itoa(i), Holder: "bench", TTLms: 60000}
	r := l.ctrl.Do(ctx, protocol.OpAcquire, Domain(dev), req)
	if r.Code != protocol.CodeGranted {
		return fmt.Errorf("acquire %s: %s %s", Domain(dev), r.Code, r.Message)
	}
	return nil
}
