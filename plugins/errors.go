package plugins

import "errors"

// Errors of package plugins.
var (
	// ErrPluginLost: the plugin process failed (crashed, was killed, broke
	// the connection) during a call. An Apply that fails with it is
	// answered in_doubt: the command may have acted.
	ErrPluginLost = errors.New("plugins: plugin lost")
	// ErrOverrun: the plugin did not answer an Apply within the grace
	// after the command's deadline (Config.OverrunGrace); the host killed
	// it. The command is answered in_doubt: it may have acted.
	ErrOverrun = errors.New("plugins: plugin overran the command's deadline")
	// ErrNotRunning: the plugin is down (crashed, restarting or closed);
	// the command did not reach it.
	ErrNotRunning = errors.New("plugins: plugin not running")
	// ErrBusy: an earlier command is still in the plugin; the command was
	// not sent.
	ErrBusy = errors.New("plugins: plugin busy")
	// ErrChecksum: the plugin binary does not match the configured sha256.
	ErrChecksum = errors.New("plugins: plugin binary checksum mismatch")
)

// errClosed: the host was closed while the plugin was starting.
var errClosed = errors.New("plugins: host closed")
