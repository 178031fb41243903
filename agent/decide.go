package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/protocol"
)

// decide runs one inbound item through the fence: checks, then a durable
// persist.Accept, then hands accepted commands to the apply stage. Every
// command gets an answer; the MQTT message is acknowledged once the answer
// is decided durably (or needs no durability: a rejection changes nothing).
func (d *device) decide(in inbound) {
	d.queueDepth.Set(float64(d.inbox.len()))
	p, rej := d.check(in.payload)
	if rej != nil {
		d.logRejected(p, *rej)
		d.answer(p.replyTo, *rej)
		in.ack()
		return
	}
	err := d.dom.settle(context.Background()) // a grant verified by now takes effect before this command
	var dec persist.Decision
	if err == nil {
		dec, err = d.env.store.Accept(context.Background(), persist.Command{Device: d.id, ID: p.cmd.ID, Token: p.tok,
			Op: p.cmd.Op, Args: p.cmd.Args, Idempotent: d.caps.Ops[p.cmd.Op].Idempotent})
	}
	if err != nil {
		// Not journaled, not acknowledged: the sender's retry (same id) is
		// decided by the restarted agent.
		d.answer(p.replyTo, d.result(p.cmd.ID, protocol.StatusFailed, protocol.CodeInternal, "fence store unavailable"))
		d.env.fatal(err)
		return
	}
	if dec.Outcome != persist.WrongDomain { // a WrongDomain decision carries the device's record of another domain
		d.dom.raised(dec.Fence)
	}
	in.ack()
	d.decided(p, dec)
}

func (d *device) decided(p pending, dec persist.Decision) {
	switch dec.Outcome {
	case persist.Accepted:
		d.applyQ.push(p)
	case persist.Duplicate:
		d.duplicate(p, dec.Record)
	case persist.Stale:
		d.answerRejected(p, d.reject(p.cmd.ID, protocol.CodeStaleToken, staleMessage))
	case persist.Conflict:
		d.answerRejected(p, d.reject(p.cmd.ID, protocol.CodeInvalidToken, "token conflicts with the fence: same position, another lease"))
	case persist.WrongDomain:
		d.answerRejected(p, d.reject(p.cmd.ID, protocol.CodeWrongDomain, "device is fenced in domain "+dec.Fence.Domain))
	case persist.IDReused:
		d.answer(p.replyTo, d.reject(p.cmd.ID, protocol.CodeBadRequest,
			"id reused with a different command (token, op or args differ from the journaled one); nothing done"))
	}
}

// duplicate answers a retry of a journaled command without applying it.
func (d *device) duplicate(p pending, rec persist.Record) {
	switch rec.State {
	case persist.StateDone, persist.StateResolved: // resolved: the operator's answer (see resolve.go)
		d.replayResult(p, rec)
	case persist.StateAccepted:
		p.await = true // in flight in the apply stage: answer after it
		d.applyQ.push(p)
	default:
		r := d.result(p.cmd.ID, protocol.StatusInDoubt, protocol.CodeInDoubt,
			"accepted before the agent stopped; unknown whether it reached the device; not re-applied")
		r.Duplicate = true
		d.answer(p.replyTo, r)
	}
}

func (d *device) replayResult(p pending, rec persist.Record) {
	b, code, err := asDuplicate(rec.Result)
	if err != nil {
		d.log.Error("stored result undecodable", "id", p.cmd.ID, "err", err)
		d.answer(p.replyTo, d.result(p.cmd.ID, protocol.StatusFailed, protocol.CodeInternal, "stored result undecodable"))
		return
	}
	d.env.m.answered(code)
	d.env.pub.publish(p.replyTo, b, false)
}

// check decodes and validates a command payload, verifies its token and
// checks domain, op and deadline. A non-nil result is the rejection to send
// (to p.replyTo, which is always set).
func (d *device) check(payload []byte) (pending, *protocol.Result) {
	p := pending{replyTo: d.resultsTopic}
	if len(payload) > d.env.maxPayload {
		return d.undecodable(payload, fmt.Sprintf("payload is %d bytes, at most %d", len(payload), d.env.maxPayload))
	}
	cmd, err := decodeCommand(payload, d.env.replies)
	if err != nil {
		return d.undecodable(payload, err.Error())
	}
	p.cmd = cmd
	if cmd.ReplyTo != "" {
		p.replyTo = cmd.ReplyTo
	}
	if cmd.DeadlineMs != 0 && time.Now().UnixMilli() > cmd.DeadlineMs && !d.journaled(cmd.ID) {
		// Fresh and too late: refused without a write. A retry of a
		// journaled command goes on, to get its journaled answer.
		return p, ptr(d.reject(cmd.ID, protocol.CodeExpired, "deadline_ms has passed"))
	}
	tok, stale := d.staleUnverified(cmd)
	if !stale {
		var err error
		if tok, err = d.env.keys.Verify(cmd.Token); err != nil {
			return p, ptr(d.reject(cmd.ID, protocol.CodeInvalidToken, err.Error()))
		}
	}
	p.tok, p.unverified = tok, stale
	if tok.Domain != d.domain {
		return p, ptr(d.reject(cmd.ID, protocol.CodeWrongDomain, fmt.Sprintf("token of domain %q, device is in %q", tok.Domain, d.domain)))
	}
	if !d.caps.Supports(cmd.Op) {
		return p, ptr(d.reject(cmd.ID, protocol.CodeUnknownOp, fmt.Sprintf("op %q is not one of the device's ops", cmd.Op)))
	}
	if err := d.checkCommand(cmd, tok); err != nil {
		return p, ptr(d.reject(cmd.ID, argsCode(err), devices.MessageOf(err)))
	}
	if stale { // after the op and args checks: the answer is the one a verified token gets
		return p, ptr(d.reject(cmd.ID, protocol.CodeStaleToken, staleMessage))
	}
	return p, nil
}

// checkCommand asks the driver, before acceptance, whether Apply would
// refuse cmd (devices.CommandChecker with the whole command, else
// devices.ArgsChecker). A refusal of a retry of a journaled command does
// not count: the retry gets its journaled answer. The journal is read only
// after a refusal, so a command the driver takes costs no store read here.
func (d *device) checkCommand(cmd protocol.Command, tok fence.Token) error {
	var err error
	switch c := d.driver.(type) {
	case devices.CommandChecker:
		err = c.CheckCommand(devices.Command{ID: cmd.ID, Op: cmd.Op, Args: cmd.Args, Token: tok})
	case devices.ArgsChecker:
		err = c.CheckArgs(cmd.Op, cmd.Args)
	}
	if err != nil && d.journaled(cmd.ID) {
		return nil
	}
	return err
}

// staleMessage is the message of a stale_token answer decided at the fence.
const staleMessage = "a newer lease holds this device"

// staleUnverified reports (stale true) whether persist.Accept would answer
// cmd Stale whatever its token's signature, and returns the token read
// without checking the signature if so: the token names the device's domain at a position below the
// domain's fence mirror (which never runs ahead of the durable fence) and
// the id is not journaled (a retry gets its journaled answer instead).
// Such a command is rejected stale_token without the Ed25519 check, so a
// flood of stale commands stays cheap; the answer is the one Accept gives.
// Otherwise stale is false and the caller verifies: a token at or above
// the fence, which could be accepted, is never taken unverified, and the
// unverified token is only ever used for this rejection.
func (d *device) staleUnverified(cmd protocol.Command) (tok fence.Token, stale bool) {
	t, err := fence.ParseUnverified(cmd.Token)
	if err != nil || t.Domain != d.domain || !newerThan(d.dom.current(), t) || d.journaled(cmd.ID) {
		return fence.Token{}, false
	}
	return t, true
}

// argsCode is the answer's code for a driver's refusal of args before
// acceptance: the error's code if it is one a refusal may have, else
// bad_request.
func argsCode(err error) protocol.Code {
	switch c := devices.CodeOf(err); c {
	case protocol.CodeUnknownOp, protocol.CodeBadRequest:
		return c
	}
	return protocol.CodeBadRequest
}

// journaled reports whether the device's journal holds id (a retry). A
// store read error counts as journaled: the command then goes on to
// Accept, which decides it (or reports the store failure).
func (d *device) journaled(id string) bool {
	_, known, err := d.env.store.Lookup(d.id, id)
	return known || err != nil
}

// undecodable rejects a payload that failed strict decoding: its id and
// reply_to are looked for loosely (only on this path: a well-formed command
// is parsed once), so the answer reaches the sender where it can.
func (d *device) undecodable(payload []byte, msg string) (pending, *protocol.Result) {
	p := pending{replyTo: d.resultsTopic}
	if rt := protocol.Salvage(payload, "reply_to", protocol.MaxReplyTopicBytes); d.env.replies.Check(rt) == nil {
		p.replyTo = rt
	}
	return p, ptr(d.reject(protocol.Salvage(payload, "id", protocol.MaxCommandIDLen), protocol.CodeBadRequest, msg))
}

func ptr[T any](v T) *T { return &v }

// decodeCommand parses a command strictly: unknown fields, wrong types and
// missing or out-of-range fields are errors that name the field; a reply_to
// the rule refuses is an error naming the rule.
func decodeCommand(payload []byte, replies protocol.ReplyRule) (protocol.Command, error) {
	var cmd protocol.Command
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cmd); err != nil {
		return cmd, fmt.Errorf("malformed command: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return cmd, fmt.Errorf("malformed command: data after the JSON object")
	}
	switch {
	case cmd.ID == "" || len(cmd.ID) > protocol.MaxCommandIDLen:
		return cmd, fmt.Errorf("id: must be 1..%d bytes", protocol.MaxCommandIDLen)
	case cmd.Token == "":
		return cmd, fmt.Errorf("token: missing")
	case cmd.Op == "" || len(cmd.Op) > fence.MaxIDLen:
		return cmd, fmt.Errorf("op: must be 1..%d bytes", fence.MaxIDLen)
	case len(cmd.Args) > 0 && !isJSONObject(cmd.Args):
		return cmd, fmt.Errorf("args: must be a JSON object")
	case cmd.DeadlineMs < 0:
		return cmd, fmt.Errorf("deadline_ms: %d is negative", cmd.DeadlineMs)
	}
	if cmd.ReplyTo != "" {
		if err := replies.Check(cmd.ReplyTo); err != nil {
			return cmd, err
		}
	}
	return cmd, nil
}

func isJSONObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && (t[0] == '{' || bytes.Equal(t, []byte("null")))
}
