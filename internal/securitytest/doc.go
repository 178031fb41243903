// Package securitytest holds the security tests that need the whole
// installation (docs/security.md, docs/operations.md): the fenced path
// over mutual TLS with the agent's embedded broker and with a real
// Mosquitto TLS listener, per-team Mosquitto ACLs, and the key-rotation
// runbook run as written while a supervisor holds a lease. It has no
// code of its own outside tests.
package securitytest
