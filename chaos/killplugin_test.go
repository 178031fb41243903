package chaos

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// startSleep starts a sleep process and returns it with a channel closed
// once it was reaped.
func startSleep(t *testing.T) (*exec.Cmd, chan struct{}) {
	t.Helper()
	c := exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { _ = c.Wait(); close(reaped) }()
	t.Cleanup(func() { _ = c.Process.Kill(); <-reaped })
	return c, reaped
}

// pluginInstall is an installation whose plugin5 (d1, agent 0) wrote pid
// to its pid file, and whose agent 0 is the process agent.
func pluginInstall(t *testing.T, pid int, agent *os.Process) *install {
	t.Helper()
	in := &install{dir: t.TempDir(), plan: Plan{Domains: []DomainPlan{{Name: "d1", Devices: []DevicePlan{{ID: "plugin5", Kind: DevicePlugin}}}}}}
	if err := os.WriteFile(filepath.Join(in.dir, "plugin5.pid"), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in.agents = []*proc{{name: "agent1", cmd: &exec.Cmd{Process: agent}}}
	return in
}

// The kill-plugin fault kills only a child of the device's agent: after a
// crash the pid file names a dead plugin until the agent starts a new one,
// and the kernel may have handed that number to any process of the
// machine (found by an attack: the harness SIGKILLed whatever had the pid,
// and recorded the fault either way, so a kill that killed no plugin still
// excused in_doubt answers). Such a fault is skipped, not recorded.
func TestKillPluginSparesAProcessThatIsNoChildOfTheAgent(t *testing.T) {
	stranger, reaped := startSleep(t)
	otherAgent, _ := startSleep(t) // the stranger is not its child
	in := pluginInstall(t, stranger.Process.Pid, otherAgent.Process)
	if err := in.killPlugin("plugin5"); !errors.Is(err, errNothingToFault) {
		t.Fatalf("killPlugin = %v, want errNothingToFault", err)
	}
	select {
	case <-reaped:
		t.Fatal("kill-plugin SIGKILLed a process that is no plugin of the agent")
	case <-time.After(300 * time.Millisecond):
	}
}

// A child of the agent named by the pid file is killed.
func TestKillPluginKillsTheAgentsChild(t *testing.T) {
	child, reaped := startSleep(t) // a child of this test process, playing the agent
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := pluginInstall(t, child.Process.Pid, self).killPlugin("plugin5"); err != nil {
		t.Fatalf("killPlugin = %v", err)
	}
	select {
	case <-reaped:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent's plugin child was not killed")
	}
}
