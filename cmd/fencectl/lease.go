package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// runLease: fencectl lease acquire|renew|release|get DOMAIN.
func runLease(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("lease", stderr)
	c := addCommon(fs)
	ttl := fs.Duration("ttl", 10*time.Second, "acquire/renew: lease time to live")
	wait := fs.Duration("wait", 0, "acquire: wait up to this long for a held domain (≤ 60s)")
	token := fs.String("token", "", "renew/release: the lease's token")
	pos, err := interspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 2 {
		return fail(stderr, errors.New("usage: fencectl lease acquire|renew|release|get DOMAIN [flags]"))
	}
	op, err := protocol.ParseLeaseOp(pos[0])
	if err != nil {
		return fail(stderr, err)
	}
	req := protocol.Request{Token: *token} // renew and release name the lease by its token alone
	switch op {
	case protocol.OpAcquire:
		req.Holder, req.TTLms, req.WaitMs = c.holder, uint64(ttl.Milliseconds()), uint64(wait.Milliseconds())
	case protocol.OpRenew:
		req.TTLms = uint64(ttl.Milliseconds())
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, c.timeout+*wait)
	defer cancel()
	resp, err := cl.LeaseRequest(rctx, pos[1], op, req)
	if err != nil {
		fmt.Fprintln(stderr, "fencectl:", err)
		return exitNoAnswer
	}
	printLease(stdout, c.json, op, pos[1], resp)
	return leaseExit(resp)
}

func printLease(w io.Writer, asJSON bool, op protocol.LeaseOp, domain string, resp protocol.Response) {
	if asJSON {
		printJSON(w, resp)
		return
	}
	fmt.Fprintf(w, "%s %s: %s", op, domain, resp.Code)
	if resp.Holder != "" {
		fmt.Fprintf(w, " (holder %s", resp.Holder)
		if resp.ExpiresInMs > 0 {
			fmt.Fprintf(w, ", expires in %v", time.Duration(resp.ExpiresInMs)*time.Millisecond)
		}
		fmt.Fprint(w, ")")
	}
	if resp.Message != "" {
		fmt.Fprintf(w, ": %s", resp.Message)
	}
	fmt.Fprintln(w)
	if resp.Token != "" {
		if t, err := fence.ParseUnverified(resp.Token); err == nil {
			fmt.Fprintf(w, "fence %d.%d holder %s\n", t.Epoch, t.Seq, t.Holder)
		}
		fmt.Fprintln(w, "token", resp.Token)
	}
}

func leaseExit(resp protocol.Response) int {
	switch resp.Code {
	case protocol.CodeGranted, protocol.CodeRenewed, protocol.CodeReleased, protocol.CodeHeld:
		if resp.OK {
			return exitOK
		}
		return exitRejected
	case protocol.CodeInternal:
		return exitFailed
	}
	return exitRejected
}
