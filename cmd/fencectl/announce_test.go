package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSendToUnannouncedDevice: a device no agent announces is refused at
// once, from the retained states, naming the device, long before the
// --timeout; nothing is sent. A device the agent announces is still sent to.
func TestSendToUnannouncedDevice(t *testing.T) {
	s := startStack(t)
	b := "--broker=" + s.URL()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // well below --timeout 60s
	defer cancel()
	out, errs, code := fencectlCtx(ctx, "send", "ghost7", "set", `{"value":1}`, b, "--domain", "plant", "--timeout", "60s")
	if ctx.Err() != nil {
		t.Fatalf("send to an unannounced device waited out the test's deadline: exit %d %q %q", code, out, errs)
	}
	if code != exitError || !strings.Contains(errs, "device ghost7: not announced by any agent") || !strings.Contains(errs, "nothing sent") {
		t.Fatalf("send to ghost7: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	out, errs, code = fencectlCtx(ctx, "send", "pump1", "set", `{"value":1}`, b, "--domain", "plant", "--timeout", "60s")
	if code != exitOK || !strings.Contains(out, "applied ok") {
		t.Fatalf("send to the announced pump1: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func fencectlCtx(ctx context.Context, args ...string) (string, string, int) {
	var out, errb strings.Builder
	code := run(ctx, args, &out, &errb)
	return out.String(), errb.String(), code
}
