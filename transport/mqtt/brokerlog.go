package mqtt

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"syscall"
)

// brokerLog is the embedded broker's logger: mochi's listeners log every
// client connection that ended with an error as a warning with an empty
// message. A client going away (EOF, reset, closed, keep-alive timeout) is
// routine and logged at debug as "client disconnected"; other failures stay
// warnings, as "client connection failed".
func brokerLog(log *slog.Logger) *slog.Logger {
	return slog.New(disconnects{log.Handler()})
}

// disconnects demotes mochi's empty-message warnings about ended client
// connections (see brokerLog).
type disconnects struct{ slog.Handler }

// Enabled lets warnings through to Handle, which may demote them.
func (h disconnects) Enabled(ctx context.Context, l slog.Level) bool {
	return l == slog.LevelWarn || h.Handler.Enabled(ctx, l)
}

func (h disconnects) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && r.Message == "" {
		r = demote(r)
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h disconnects) WithAttrs(as []slog.Attr) slog.Handler {
	return disconnects{h.Handler.WithAttrs(as)}
}

func (h disconnects) WithGroup(name string) slog.Handler {
	return disconnects{h.Handler.WithGroup(name)}
}

// demote rewrites an empty-message warning: debug "client disconnected"
// if its error is a client going away, else warn "client connection failed".
func demote(r slog.Record) slog.Record {
	level, msg := slog.LevelWarn, "client connection failed"
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "error" && goneAway(err) {
			level, msg = slog.LevelDebug, "client disconnected"
		}
		return true
	})
	out := slog.NewRecord(r.Time, level, msg, r.PC)
	r.Attrs(func(a slog.Attr) bool { out.AddAttrs(a); return true })
	return out
}

// goneAway reports errors of a connection the client (or the network)
// ended: nothing for an operator to act on.
func goneAway(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrDeadlineExceeded)
}
