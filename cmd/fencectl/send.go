package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
)

// runSend: fencectl send DEVICE OP [ARGS-JSON] (--token T | --domain D).
func runSend(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("send", stderr)
	c := addCommon(fs)
	token := fs.String("token", "", "token to send under (from 'fencectl lease acquire')")
	domain := fs.String("domain", "", "acquire a lease on this domain first (instead of --token), release it after")
	ttl := fs.Duration("ttl", 10*time.Second, "with --domain: lease time to live")
	id := fs.String("id", "", "command id; reuse one to retry a command (default: a new id)")
	check := fs.Bool("check-device", true, "first check that an agent announces DEVICE online (its retained state), and send nothing if not")
	pos, err := interspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) < 2 || len(pos) > 3 || (*token == "") == (*domain == "") {
		return fail(stderr, errors.New("usage: fencectl send DEVICE OP [ARGS-JSON] (--token T | --domain D) [flags]"))
	}
	var cmdArgs any
	if len(pos) == 3 {
		var raw json.RawMessage
		if err := json.Unmarshal([]byte(pos[2]), &raw); err != nil {
			return fail(stderr, fmt.Errorf("ARGS-JSON: %w", err))
		}
		cmdArgs = raw
	}
	if *check {
		if err := checkAnnounced(ctx, c, pos[0]); err != nil {
			return fail(stderr, err)
		}
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	defer cl.Close()
	sctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	res, err := send(sctx, cl, *token, *domain, *ttl, *id, pos[0], pos[1], cmdArgs)
	return report(stdout, stderr, c.json, res, err)
}

// send sends under token, or under a lease it acquires (and releases) on
// domain; then the command's deadline_ms is also bounded by the lease.
func send(ctx context.Context, cl *supervisor.Client, token, domain string, ttl time.Duration, id, device, op string, args any) (protocol.Result, error) {
	if id == "" {
		id = rand.Text()
	}
	if token != "" {
		return cl.SendID(ctx, id, token, device, op, args)
	}
	l, err := cl.Acquire(ctx, domain, supervisor.AcquireOptions{TTL: ttl})
	if err != nil {
		return protocol.Result{}, err
	}
	defer l.Release(context.WithoutCancel(ctx))
	return l.SendID(ctx, id, device, op, args)
}

// report prints a result (or error) and returns the exit code of its status.
func report(stdout, stderr io.Writer, asJSON bool, res protocol.Result, err error) int {
	if res.ID == "" && err != nil {
		fmt.Fprintln(stderr, "fencectl:", err)
		if errors.Is(err, supervisor.ErrNoResult) || errors.Is(err, supervisor.ErrNoAnswer) {
			return exitNoAnswer
		}
		if errors.Is(err, supervisor.ErrHeld) {
			return exitRejected
		}
		return exitError
	}
	if asJSON {
		printJSON(stdout, res)
	} else {
		fmt.Fprintln(stdout, describeResult(res))
	}
	return statusExit(res.Status)
}

func describeResult(r protocol.Result) string {
	s := fmt.Sprintf("%s %s: %s %s", r.Device, r.ID, r.Status, r.Code)
	if r.Duplicate {
		s += " (duplicate)"
	}
	if r.Message != "" {
		s += ": " + r.Message
	}
	if r.Fence != nil {
		s += fmt.Sprintf(" [fence %d.%d %s]", r.Fence.Epoch, r.Fence.Seq, r.Fence.Holder)
	}
	if len(r.Output) > 0 {
		s += " output " + string(r.Output)
	}
	return s
}

func statusExit(s protocol.Status) int {
	switch s {
	case protocol.StatusApplied:
		return exitOK
	case protocol.StatusRejected:
		return exitRejected
	case protocol.StatusFailed:
		return exitFailed
	case protocol.StatusInDoubt:
		return exitInDoubt
	}
	return exitError
}
