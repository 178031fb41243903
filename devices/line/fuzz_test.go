package line

import (
	"testing"
	"unicode/utf8"
)

// FuzzMatch: any reply line is classified without panicking, and the
// class agrees with the patterns: Success only if the success pattern
// matches (and "reply" is the line), DeviceError only if the error
// pattern matches, Other only if neither does.
func FuzzMatch(f *testing.F) {
	f.Add("VAL 1 on")
	f.Add("ERR -222 out of range")
	f.Add("\xff\xfeVAL 1 x")
	ops, err := compile(testConfig("/x"))
	if err != nil {
		f.Fatal(err)
	}
	m := ops["get"].match
	f.Fuzz(func(t *testing.T, line string) {
		kind, out, msg := m.match(line)
		okm, errm := m.ok.MatchString(line), m.err.MatchString(line)
		switch kind {
		case Success:
			if !okm || errm || out["reply"] != line {
				t.Fatalf("Success for %q: ok %v err %v out %v", line, okm, errm, out)
			}
		case DeviceError:
			if !errm || msg == "" && line != "" && utf8.ValidString(line) {
				t.Fatalf("DeviceError for %q with message %q", line, msg)
			}
		case Other:
			if okm || errm {
				t.Fatalf("Other for %q, but ok %v err %v", line, okm, errm)
			}
		}
	})
}
