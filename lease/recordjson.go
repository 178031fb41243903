package lease

import (
	"encoding/json"
	"slices"
	"strconv"
)

// AppendJSON appends r's JSON form to b and returns the result: exactly
// the bytes json.Marshal(r) gives (the stores' format), written without
// reflection. A grant rewrites its domain's record with up to MaxRequests
// remembered requests, and encoding that by reflection was the largest
// part of a grant's CPU.
func (r Record) AppendJSON(b []byte) []byte {
	b = slices.Grow(b, r.sizeHint())
	b = append(b, `{"version":`...)
	b = strconv.AppendUint(b, r.Version, 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	if r.Lease != nil {
		b = append(b, `,"lease":`...)
		b = r.Lease.appendJSON(b)
	}
	if len(r.Requests) > 0 {
		b = append(b, `,"requests":[`...)
		for i, q := range r.Requests {
			if i > 0 {
				b = append(b, ',')
			}
			b = q.AppendJSON(b)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// sizeHint is about the length of r's JSON form (exact for ids and
// numbers of typical length), so that AppendJSON grows its buffer once.
func (r Record) sizeHint() int {
	n := 64
	if l := r.Lease; l != nil {
		n += 120 + len(l.Token) + len(l.Holder) + len(l.RequestID)
	}
	for _, q := range r.Requests {
		n += 80 + len(q.ID) + len(q.Holder)
	}
	return n
}

func (l *LeaseRecord) appendJSON(b []byte) []byte {
	b = append(b, `{"token":`...)
	b = appendJSONString(b, l.Token)
	b = append(b, `,"epoch":`...)
	b = strconv.AppendUint(b, l.Epoch, 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, l.Seq, 10)
	b = append(b, `,"holder":`...)
	b = appendJSONString(b, l.Holder)
	b = append(b, `,"request_id":`...)
	b = appendJSONString(b, l.RequestID)
	b = append(b, `,"ttl_ms":`...)
	b = strconv.AppendUint(b, l.TTLms, 10)
	return append(b, '}')
}

// AppendJSON appends q's JSON form to b: exactly json.Marshal(q).
func (q RequestRecord) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, q.ID)
	b = append(b, `,"holder":`...)
	b = appendJSONString(b, q.Holder)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, q.Seq, 10)
	b = append(b, `,"at_ms":`...)
	b = strconv.AppendInt(b, q.AtMs, 10)
	b = append(b, `,"ttl_ms":`...)
	b = strconv.AppendUint(b, q.TTLms, 10)
	return append(b, '}')
}

// appendJSONString appends s as encoding/json writes it. Ids and tokens
// are plain ASCII and are copied as they are; any other string goes
// through encoding/json, so escaping (control bytes, quotes, HTML
// characters, invalid UTF-8, U+2028) is json.Marshal's own.
func appendJSONString(b []byte, s string) []byte {
	if plainJSON(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, err := json.Marshal(s)
	if err != nil { // a string always encodes; keep the output valid anyway
		q = []byte(`""`)
	}
	return append(b, q...)
}

// plainJSON reports whether encoding/json writes s unchanged between
// quotes: printable ASCII other than the quote, the backslash and the
// characters it escapes for HTML (<, >, &).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
