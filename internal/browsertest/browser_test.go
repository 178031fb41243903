package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// browser is one headless Chromium tab that records every console error,
// uncaught exception and browser-log error or warning (a CSP violation, a
// failed load) the page causes.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex // guards problems
	problems []string
}

// chromium finds the browser binary or skips the test, saying what to
// install (.ci/run installs it).
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed: the real-browser tests need it (apt-get install -y chromium; .ci/run installs it)")
	return ""
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx}
	if err := chromedp.Listen(ctx, b.record); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

// record runs on chromedp's reading goroutine: it only appends.
func (b *browser) record(ev any) {
	var p string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		p = "exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			p += " " + ev.ExceptionDetails.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			p = "console." + string(ev.Type)
			for _, a := range ev.Args {
				p += " " + string(a.Value) + a.Description
			}
		}
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
			p = "browser log " + string(ev.Entry.Level) + ": " + ev.Entry.Text + " " + ev.Entry.URL
		}
	}
	if p != "" {
		b.mu.Lock()
		b.problems = append(b.problems, p)
		b.mu.Unlock()
	}
}

// noProblems fails the test if the page logged an error so far.
func (b *browser) noProblems() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.problems) > 0 {
		b.t.Fatalf("the page logged errors:\n%s", strings.Join(b.problems, "\n"))
	}
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

// open loads url and waits until sel is visible.
func (b *browser) open(url, sel string) {
	b.t.Helper()
	b.do(chromedp.Navigate(url), chromedp.WaitVisible(sel))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitTrue polls a JavaScript predicate until it holds (the page refreshes
// itself) and fails the test, showing what the page has, if it never does.
func (b *browser) waitTrue(what, predicate, show string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](predicate, chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		b.mu.Lock()
		problems := strings.Join(b.problems, "\n")
		b.mu.Unlock()
		b.t.Fatalf("%s: %v; the page shows %q; console problems:\n%s", what, err, eval[string](b, show), problems)
	}
}

// screenshot saves the page as PNG: to $FENCEGATE_SCREENSHOTS if set (to
// look at), else into the test's temporary directory.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	buf, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	dir := os.Getenv("FENCEGATE_SCREENSHOTS")
	if dir == "" {
		dir = b.t.TempDir()
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
