package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// runToken: fencectl token decode TOKEN [--pub FILE].
func runToken(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("token", stderr)
	pub := fs.String("pub", "", "controller public key file: also check the signature")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := interspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 2 || pos[0] != "decode" {
		return fail(stderr, errors.New("usage: fencectl token decode TOKEN [--pub FILE]"))
	}
	t, err := fence.ParseUnverified(pos[1])
	if err != nil {
		fmt.Fprintln(stderr, "fencectl: token:", err)
		return exitRejected
	}
	verified, verr := verify(pos[1], *pub)
	printToken(stdout, *asJSON, t, *pub != "", verified, verr)
	if *pub != "" && !verified {
		return exitRejected
	}
	return exitOK
}

func verify(token, pubFile string) (bool, error) {
	if pubFile == "" {
		return false, nil
	}
	key, err := fence.LoadPublicKey(pubFile)
	if err != nil {
		return false, err
	}
	ring, err := fence.NewKeyRing(1, key)
	if err != nil {
		return false, err
	}
	_, err = ring.Verify(token)
	return err == nil, err
}

type tokenView struct {
	Domain   string `json:"domain"`
	Epoch    uint64 `json:"epoch"`
	Seq      uint64 `json:"seq"`
	Holder   string `json:"holder"`
	IssuedAt string `json:"issued_at"`
	TTLms    uint32 `json:"ttl_ms"`
	KeyID    string `json:"key_id"`
	Verified *bool  `json:"verified,omitempty"`
	Error    string `json:"error,omitempty"`
}

func printToken(w io.Writer, asJSON bool, t fence.Token, checked, ok bool, verr error) {
	v := tokenView{Domain: t.Domain, Epoch: t.Epoch, Seq: t.Seq, Holder: t.Holder,
		IssuedAt: t.Issued().UTC().Format(time.RFC3339Nano), TTLms: t.TTLms, KeyID: t.KeyID.String()}
	if checked {
		v.Verified = &ok
		if verr != nil {
			v.Error = verr.Error()
		}
	}
	if asJSON {
		printJSON(w, v)
		return
	}
	fmt.Fprintf(w, "domain    %s\nepoch     %d\nseq       %d\nholder    %s\nissued_at %s\nttl       %v\nkey_id    %s\n",
		v.Domain, v.Epoch, v.Seq, v.Holder, v.IssuedAt, t.TTL(), v.KeyID)
	if checked {
		if ok {
			fmt.Fprintln(w, "signature valid")
		} else {
			fmt.Fprintln(w, "signature INVALID:", v.Error)
		}
	}
}
