package archtest

import (
	"fmt"
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// errWrapPending names files that still format an error with a verb other
// than %w, owned by work in progress elsewhere.
var errWrapPending = pending{}

// TestErrorsWrapWithW (issue 13: one error-wrapping rule): no fmt.Errorf
// of non-test code formats an error (an identifier named err, ending in
// Err or err, or a call of Err() or Error()) with a verb other than %w —
// %v of an error breaks errors.Is and errors.As.
func TestErrorsWrapWithW(t *testing.T) {
	findings := map[string][]string{}
	for _, f := range moduleFiles(t, func(p string) bool { return !isTest(p) }) {
		ast.Inspect(f.file, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				findings[f.path] = append(findings[f.path], unwrapped(f, call)...)
			}
			return true
		})
	}
	errWrapPending.report(t, findings)
}

// unwrapped returns a sentence for each error argument of an fmt.Errorf
// call formatted with a verb other than %w.
func unwrapped(f sourceFile, call *ast.CallExpr) []string {
	if !isErrorf(call) || len(call.Args) == 0 {
		return nil
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return nil
	}
	format, err := strconv.Unquote(lit.Value)
	if err != nil {
		return nil
	}
	var out []string
	for i, verb := range verbs(format) {
		if i+1 < len(call.Args) && verb != 'w' && isErrorExpr(call.Args[i+1]) {
			out = append(out, fmt.Sprintf("line %d: %%%c of an error in fmt.Errorf; use %%w",
				f.fset.Position(call.Pos()).Line, verb))
		}
	}
	return out
}

func isErrorf(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Errorf" {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "fmt"
}

// verbs returns the verbs of format, one per argument it consumes
// (%% consumes none; a * width or precision counts as a verb '*').
func verbs(format string) []rune {
	var out []rune
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		for i++; i < len(format) && strings.IndexByte("+-# 0123456789.[]*", format[i]) >= 0; i++ {
			if format[i] == '*' {
				out = append(out, '*')
			}
		}
		if i < len(format) && format[i] != '%' {
			out = append(out, rune(format[i]))
		}
	}
	return out
}

// isErrorExpr reports whether e looks like an error value: an identifier
// named err or ending in Err/err, or a call of a method Err or Error.
func isErrorExpr(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "err" || strings.HasSuffix(e.Name, "Err") || strings.HasSuffix(e.Name, "err")
	case *ast.CallExpr:
		sel, ok := e.Fun.(*ast.SelectorExpr)
		return ok && (sel.Sel.Name == "Err" || sel.Sel.Name == "Error")
	}
	return false
}
