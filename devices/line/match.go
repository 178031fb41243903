package line

import "regexp"

// Kind classifies a reply line.
type Kind int

// Reply kinds.
const (
	Other       Kind = iota // neither pattern: skipped
	Success                 // the op's success pattern
	DeviceError             // the op's error pattern (checked first)
)

// matcher holds an op's reply patterns.
type matcher struct {
	ok, err *regexp.Regexp // err may be nil
}

// match classifies line. For Success, out holds the success pattern's
// non-empty named groups and "reply" (the whole line); for DeviceError,
// msg is the group "message" if the pattern has one, else the line.
func (m matcher) match(line string) (kind Kind, out map[string]string, msg string) {
	if m.err != nil {
		if sub := m.err.FindStringSubmatch(line); sub != nil {
			msg = line
			if i := m.err.SubexpIndex("message"); i > 0 && sub[i] != "" {
				msg = sub[i]
			}
			return DeviceError, nil, msg
		}
	}
	sub := m.ok.FindStringSubmatch(line)
	if sub == nil {
		return Other, nil, ""
	}
	out = map[string]string{"reply": line}
	for i, name := range m.ok.SubexpNames() {
		if name != "" && name != "reply" {
			out[name] = sub[i]
		}
	}
	return Success, out, ""
}
