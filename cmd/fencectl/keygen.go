package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/fencegate/fencegate/fence"
)

func runKeygen(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("keygen", stderr)
	dir := fs.String("dir", ".", "directory for controller.key (0600) and controller.pub")
	force := fs.Bool("force", false, "replace an existing controller.key")
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	id, err := fence.WriteKeyPair(*dir, *force)
	if errors.Is(err, os.ErrExist) {
		return fail(stderr, fmt.Errorf("%s exists; use --force to replace it", filepath.Join(*dir, fence.PrivateKeyFile)))
	}
	if err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "wrote %s and %s (key id %s)\n", filepath.Join(*dir, fence.PrivateKeyFile),
		filepath.Join(*dir, fence.PublicKeyFile), id)
	return exitOK
}
