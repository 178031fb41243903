package plugins

import (
	"os/exec"
	"syscall"
)

// dieWithHost makes cmd's process get SIGKILL when the thread that starts
// it ends; Host starts plugins from a thread that ends only with the agent
// process or the Host (see spawner).
func dieWithHost(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
