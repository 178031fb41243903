// Package pagehead sets the response headers of fencegate's read-only HTML
// status pages (the agent's and the controller's): no caching, and a
// Content-Security-Policy that allows only the page's own inline style and
// script, by a nonce made for each response, and fetches to its own origin.
package pagehead

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
)

// Set writes the status page headers to w and returns the nonce the page's
// <style> and <script> elements must carry.
func Set(w http.ResponseWriter) (nonce string) {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	nonce = base64.RawStdEncoding.EncodeToString(b)
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; connect-src 'self'; style-src 'nonce-"+nonce+
		"'; script-src 'nonce-"+nonce+"'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	return nonce
}
