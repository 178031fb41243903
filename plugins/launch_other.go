//go:build !linux

package plugins

import "os/exec"

// dieWithHost does nothing here: only Linux has Pdeathsig. A plugin built
// on Serve still exits when its parent goes (see watchParent).
func dieWithHost(*exec.Cmd) {}
