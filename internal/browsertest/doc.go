// Package browsertest holds the real-browser tests of the status pages of
// the agent (agent/statuspage.go) and the controller (lease/httpapi): a
// headless Chromium driven by chromedp loads each page served by a real
// agent, controller and embedded broker, and checks what a person sees —
// no console errors, the fence moving when a new holder writes, ids that
// cannot inject markup. The package has no code of its own: it keeps
// chromedp out of the product packages' tests.
package browsertest
