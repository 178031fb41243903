package benchagent

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// RSS returns this process's resident set size in bytes, from
// /proc/self/status (Linux only; elsewhere an error).
func RSS() (int64, error) { return procStatus("VmRSS:") }

// RSSAnon returns the anonymous part of this process's resident set (the
// heap and stacks, not mapped files such as bbolt's), in bytes, from
// /proc/self/status (Linux only; elsewhere an error).
func RSSAnon() (int64, error) { return procStatus("RssAnon:") }

// procStatus returns the value, in bytes, of the kB line of
// /proc/self/status whose first field is key.
func procStatus(key string) (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("rss: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == key {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("rss: %q: %w", sc.Text(), err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("rss: no %s line in /proc/self/status", key)
}
