// Package httpauth authenticates HTTP clients of fencegate's servers: by a
// verified TLS client certificate (its subject common name is the
// identity) or by a bearer token from a token file (the line's name is
// the identity). Middleware guards the handlers that need it; open ones
// (health, readiness, metrics, public keys) are simply not wrapped.
//
// It imports nothing of fencegate's: the controller's HTTP API uses it
// and so may the agent's.
package httpauth
