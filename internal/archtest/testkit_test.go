package archtest

import (
	"fmt"
	"go/ast"
	"strings"
	"testing"
)

// testKitPending names test files that still hold a copy, owned by work in
// progress elsewhere.
var testKitPending = pending{
	"lease/mqttapi/replyto_test.go": "its own slog handler; lease/ is changed by the controller-library work",
}

// TestTestKitReplacesCopies (issue 13, "Test kit"): tests build signers
// from a seed with fence/fencetest, read driver codes with devices.CodeOf
// and record logs with internal/logtest, instead of copies of those
// helpers. fence's own internal tests, which cannot import fencetest (it
// imports fence), share its seeds through fence/internal/seedkey.
func TestTestKitReplacesCopies(t *testing.T) {
	findings := map[string][]string{}
	kitTests := func(p string) bool { return isTest(p) && !strings.HasPrefix(p, "internal/archtest/") }
	for _, f := range moduleFiles(t, kitTests) {
		findings[f.path] = append(findings[f.path], testKitCopies(f)...)
	}
	testKitPending.report(t, findings)
}

// testKitCopies returns what f copies of the shared test kit.
func testKitCopies(f sourceFile) []string {
	var out []string
	if !strings.HasPrefix(f.path, "fence/") && strings.Contains(f.text, "NewKeyFromSeed(") ||
		strings.Contains(f.text, "for i := range seed {") {
		out = append(out, "builds a signer from a seed; use fencetest.MustSigner")
	}
	for _, d := range f.file.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		body := f.text[f.fset.Position(fn.Body.Pos()).Offset:f.fset.Position(fn.Body.End()).Offset]
		if strings.Contains(body, "errors.As(") && strings.Contains(body, "return e.Code") {
			out = append(out, fmt.Sprintf("%s copies devices.CodeOf", fn.Name.Name))
		}
		if fn.Name.Name == "Handle" && fn.Recv != nil && strings.Contains(f.text, "slog.Record) error") &&
			!strings.HasPrefix(f.path, "internal/logtest/") {
			out = append(out, "implements its own slog recorder; use internal/logtest")
		}
	}
	return out
}
