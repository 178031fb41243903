package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/protocol"
)

// apply runs one accepted command through the driver, makes its result
// durable, then publishes it. A command whose deadline passed while it
// waited is not applied; its result says expired.
func (d *device) apply(p pending) {
	var res protocol.Result
	if p.cmd.DeadlineMs != 0 && time.Now().UnixMilli() > p.cmd.DeadlineMs {
		res = d.reject(p.cmd.ID, protocol.CodeExpired, "deadline_ms passed before the device was free")
	} else if stale, ok := d.recheck(p); !ok {
		return // the store failed; the agent stops
	} else if stale != nil {
		res = *stale
		d.logRejected(p, res)
	} else {
		res = d.applyToDriver(p)
	}
	b := mustJSON(res)
	complete := d.env.store.Complete
	if res.Status == protocol.StatusInDoubt {
		complete = d.env.store.CompleteInDoubt // listed for an operator to resolve
	}
	if err := complete(context.Background(), d.id, p.cmd.ID, b); err != nil {
		if !errors.Is(err, persist.ErrNotAccepted) {
			d.env.fatal(err)
			return
		}
		d.log.Error("result for a command not in flight", "id", p.cmd.ID, "err", err)
	}
	d.setLast(res)
	d.env.m.answered(res.Code)
	d.env.pub.publish(p.replyTo, b, false)
}

// recheck compares an accepted command with its domain's durable fence
// just before it would enter the driver: a grant, or a command to another
// device of the domain, may have raised the fence while it waited. It also
// asks the key ring again: a key removed (SIGHUP, key rotation) while the
// command waited no longer drives the device. It returns the rejection if
// the command is stale or its key untrusted now, and ok false if the store
// failed (reported as fatal).
func (d *device) recheck(p pending) (stale *protocol.Result, ok bool) {
	if !d.env.keys.Trusts(p.tok.KeyID) {
		r := d.reject(p.cmd.ID, protocol.CodeInvalidToken,
			fmt.Sprintf("the key %s that signed this token was removed while the command waited; not applied", p.tok.KeyID))
		return &r, true
	}
	if err := d.dom.settle(context.Background()); err != nil {
		d.env.fatal(err)
		return nil, false
	}
	cur, err := d.env.store.DomainFence(d.domain)
	if err != nil {
		d.env.fatal(err)
		return nil, false
	}
	if !newerThan(cur, p.tok) || persist.MutantNoFence {
		return nil, true
	}
	d.dom.raised(cur)
	r := d.reject(p.cmd.ID, protocol.CodeStaleToken, "a newer lease was accepted while the command waited; not applied")
	f := cur.Fence()
	r.Fence = &f
	return &r, true
}

func (d *device) applyToDriver(p pending) protocol.Result {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Timeout)
	defer cancel()
	if p.cmd.DeadlineMs != 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, time.UnixMilli(p.cmd.DeadlineMs))
		defer c2()
	}
	start := time.Now()
	out, err := d.driver.Apply(ctx, devices.Command{ID: p.cmd.ID, Op: p.cmd.Op, Args: p.cmd.Args, Token: p.tok})
	d.env.m.apply.Observe(time.Since(start).Seconds())
	if devices.CodeOf(err) == devices.CodeOutputDropped {
		return d.result(p.cmd.ID, protocol.StatusApplied, protocol.CodeOK, err.Error())
	}
	if err != nil {
		return d.failure(p.cmd.ID, err)
	}
	if len(out) > devices.MaxOutputBytes {
		return d.result(p.cmd.ID, protocol.StatusApplied, protocol.CodeOK,
			fmt.Sprintf("applied; its output of %d bytes is over the %d-byte cap and was dropped", len(out), devices.MaxOutputBytes))
	}
	r := d.result(p.cmd.ID, protocol.StatusApplied, protocol.CodeOK, "")
	if len(out) > 0 && json.Valid(out) {
		r.Output = out
	}
	return r
}

// failure maps a driver error to its result.
func (d *device) failure(id string, err error) protocol.Result {
	code := devices.CodeOf(err)
	switch code {
	case devices.CodeStaleToken:
		r := d.reject(id, protocol.CodeStaleToken, "the device's own fence refused the token: "+devices.MessageOf(err))
		var de *devices.Error
		if errors.As(err, &de) && de.Fence != nil {
			r.Fence = de.Fence
		}
		return r
	case devices.CodeUnknownOp:
		return d.reject(id, protocol.CodeUnknownOp, devices.MessageOf(err))
	case devices.CodeInDoubt:
		return d.result(id, protocol.StatusInDoubt, protocol.CodeInDoubt, devices.MessageOf(err))
	}
	return d.result(id, protocol.StatusFailed, code, devices.MessageOf(err))
}

// answerAwaited answers a retry of a command that was in flight when the
// retry was decided; by now the apply stage has finished it. The decision
// pinned the command's record (persist.Store.Unpin), so pruning has kept
// it, with its result, until this read.
func (d *device) answerAwaited(p pending) {
	rec, ok, err := d.env.store.Lookup(d.id, p.cmd.ID)
	d.env.store.Unpin(d.id, p.cmd.ID)
	if err != nil {
		d.env.fatal(err)
		return
	}
	if ok && (rec.State == persist.StateDone || rec.State == persist.StateResolved) {
		d.replayResult(p, rec)
		return
	}
	r := d.result(p.cmd.ID, protocol.StatusInDoubt, protocol.CodeInDoubt, "no result recorded for the original command")
	r.Duplicate = true
	d.answer(p.replyTo, r)
}

// answer publishes a result that needs no durable record (a rejection, or
// a replay) and counts it.
func (d *device) answer(topic string, r protocol.Result) {
	d.env.m.answered(r.Code)
	d.env.pub.publish(topic, mustJSON(r), false)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("agent: encode: " + err.Error()) // only our own plain structs are encoded
	}
	return b
}
