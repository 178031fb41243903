package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sourceFile is one parsed Go file of the module.
type sourceFile struct {
	path string // slash-separated, relative to the module root
	fset *token.FileSet
	file *ast.File
	text string
}

// moduleFiles parses the module's Go files (skipping nested modules,
// testdata and hidden directories) for which keep(path) is true.
func moduleFiles(t *testing.T, keep func(path string) bool) []sourceFile {
	t.Helper()
	var files []sourceFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
		if d.IsDir() {
			return skipDir(p, rel, d.Name())
		}
		if !strings.HasSuffix(rel, ".go") || !keep(rel) {
			return nil
		}
		f, err := parseFile(p, rel)
		files = append(files, f)
		return err
	})
	if err != nil {
		t.Fatalf("read the module's sources: %v", err)
	}
	if len(files) == 0 {
		t.Fatal("found no Go file in the module")
	}
	return files
}

// skipDir tells WalkDir to skip directories that are not this module's
// sources: hidden ones, testdata, and nested modules.
func skipDir(p, rel, name string) error {
	if p == root {
		return nil
	}
	if strings.HasPrefix(name, ".") || name == "testdata" {
		return filepath.SkipDir
	}
	if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
		return filepath.SkipDir
	}
	return nil
}

func parseFile(p, rel string) (sourceFile, error) {
	src, err := os.ReadFile(p)
	if err != nil {
		return sourceFile{}, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution)
	return sourceFile{path: rel, fset: fset, file: f, text: string(src)}, err
}

// isTest reports whether path is a test file.
func isTest(path string) bool { return strings.HasSuffix(path, "_test.go") }

// pending lists findings in files owned by work in progress elsewhere:
// each file named must still have a finding (so the entry is removed when
// it is fixed), and findings in it are not failures meanwhile.
type pending map[string]string

// report fails t for each finding (path → sentences) outside p, and for
// each entry of p whose file has no finding any more.
func (p pending) report(t *testing.T, findings map[string][]string) {
	t.Helper()
	for path, msgs := range findings {
		if _, ok := p[path]; ok {
			continue
		}
		for _, m := range msgs {
			t.Errorf("%s: %s", path, m)
		}
	}
	for path, why := range p {
		if len(findings[path]) == 0 {
			t.Errorf("%s is listed as pending (%s) but has no finding: remove the entry", path, why)
		}
	}
}
