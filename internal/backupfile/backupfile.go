// Package backupfile fetches an online backup of a store from the running
// process that holds it (its HTTP API streams a bbolt Tx.WriteTo) into a
// file: streamed to a temporary file beside the target, fsynced, checked,
// then moved into place, so that a cut connection, a short stream or a bad
// copy never leaves a file that looks like a backup. It imports only
// internal/atomicfile.
package backupfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/fencegate/fencegate/internal/atomicfile"
)

// Request names what to fetch and where to put it.
type Request struct {
	// URL of the backup endpoint, e.g. http://127.0.0.1:9464/v1/backup.
	URL string
	// Token, if not empty, is sent as "Authorization: Bearer <Token>".
	Token string
	// Out is the file to write (mode 0600). An existing file is an error
	// wrapping os.ErrExist unless Overwrite.
	Out       string
	Overwrite bool
	// Check inspects the fetched copy (a complete temporary file) before
	// it is moved to Out; an error keeps Out as it was.
	Check func(path string) error
}

// Fetch fetches the backup and returns its size in bytes.
func Fetch(ctx context.Context, r Request) (int64, error) {
	if !r.Overwrite {
		if _, err := os.Stat(r.Out); err == nil {
			return 0, fmt.Errorf("%s: %w (use --force to replace it)", r.Out, os.ErrExist)
		}
	}
	body, err := get(ctx, r)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	tmp, n, err := writeTemp(r.Out, body)
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp) // a no-op once renamed
	if r.Check != nil {
		if err := r.Check(tmp); err != nil {
			return 0, fmt.Errorf("the fetched copy is not usable: %w", err)
		}
	}
	if err := os.Rename(tmp, r.Out); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	return n, atomicfile.SyncDir(filepath.Dir(r.Out))
}

func get(ctx context.Context, r Request) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("backup from %s: %w", r.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("backup from %s: %s: %s", r.URL, resp.Status, strings.TrimSpace(string(msg)))
	}
	return resp.Body, nil
}

// writeTemp streams body into a new fsynced temporary file beside out.
// A stream shorter than its Content-Length is an error (net/http reports
// it as io.ErrUnexpectedEOF).
func writeTemp(out string, body io.Reader) (name string, n int64, err error) {
	f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".part*")
	if err != nil {
		return "", 0, fmt.Errorf("backup: %w", err)
	}
	defer func() {
		err = errors.Join(err, f.Close())
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return "", 0, fmt.Errorf("backup: %w", err)
	}
	if n, err = io.Copy(f, body); err != nil {
		return "", n, fmt.Errorf("backup cut short after %d bytes: %w", n, err)
	}
	if err := f.Sync(); err != nil {
		return "", n, fmt.Errorf("backup: %w", err)
	}
	return f.Name(), n, nil
}

// LoopbackURL turns a listen address into a URL to reach it from this
// host: an unspecified host (":9464", "0.0.0.0:9464", "[::]:9464") is
// reached on 127.0.0.1.
func LoopbackURL(listen, path string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}
