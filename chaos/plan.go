package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Plan is one schedule: the installation, the workload and the faults,
// all drawn from Seed. The same seed and options give the same Plan; the
// interleaving of a run is up to the machine.
type Plan struct {
	Seed        uint64            `json:"seed"`
	Duration    time.Duration     `json:"duration"`
	TTL         time.Duration     `json:"ttl"`
	Queue       int               `json:"queue"` // the agents' per-device queue bound
	Agents      int               `json:"agents"`
	Domains     []DomainPlan      `json:"domains"`
	Supervisors []SupervisorPlan  `json:"supervisors"`
	Faults      []FaultPlan       `json:"faults"`
	Options     map[string]string `json:"options,omitempty"` // broker, store
}

// DomainPlan is a fencing domain and its devices, all on one agent (a
// domain's devices must share one enforcement point; see docs/reliability.md).
type DomainPlan struct {
	Name    string       `json:"name"`
	Agent   int          `json:"agent"` // index into the agents, from 0
	Devices []DevicePlan `json:"devices"`
}

// Device kinds of a plan.
const (
	DeviceSim      = "sim"      // devices/sim in the agent, trusting the agent (no_fence), with an apply log
	DeviceFirmware = "firmware" // the reference firmware on a pseudo-terminal (frame protocol; keeps its own fence)
	DevicePlugin   = "plugin"   // plugins/simdevice as a go-plugin child of the agent
)

// DevicePlan is one device.
type DevicePlan struct {
	ID           string        `json:"id"`
	Kind         string        `json:"kind"`
	Latency      time.Duration `json:"latency"`
	TimeoutEvery int           `json:"timeout_every,omitempty"` // sim only: every Nth apply times out
}

// Step kinds of a supervisor's workload.
const (
	StepWork     = "work"     // acquire (maybe waiting), a few commands to the domain's devices, maybe a retry of one id, release or keep
	StepPipeline = "pipeline" // a pulse longer than the TTL with sets queued behind it, then hand the lease over at once
	StepStale    = "stale"    // a lease without renewals, a stall past its TTL, then writes with the old token
	StepBurst    = "burst"    // more commands at once than the device's queue holds
	StepPause    = "pause"    // do nothing for a while
)

// Step is one thing a supervisor does.
type Step struct {
	Kind     string        `json:"kind"`
	Domain   string        `json:"domain"`
	Wait     time.Duration `json:"wait,omitempty"`     // acquire's wait_ms
	Commands int           `json:"commands,omitempty"` // work, burst, stale: how many
	Retry    bool          `json:"retry,omitempty"`    // work: send one id twice
	Release  bool          `json:"release,omitempty"`  // work: release at the end (else keep until the next step)
	Sleep    time.Duration `json:"sleep,omitempty"`    // pause, stale: how long
	Pick     uint64        `json:"pick"`               // picks devices and values
}

// SupervisorPlan is one supervisor process and its steps, run in a loop
// until the schedule's duration is over.
type SupervisorPlan struct {
	Name  string `json:"name"`
	Steps []Step `json:"steps"`
}

// Fault kinds.
const (
	FaultStop       = "stop"       // SIGSTOP a supervisor past its TTL, then SIGCONT
	FaultKillAgent  = "kill-agent" // SIGKILL an agent, restart it after a pause
	FaultKillCtrl   = "kill-controller"
	FaultKillBroker = "kill-broker"
	FaultPartition  = "partition"   // blackhole a process's link to the broker
	FaultReset      = "reset"       // drop a process's broker connections and refuse new ones
	FaultDelay      = "delay"       // slow a process's link to the broker
	FaultUnplug     = "unplug"      // unplug the firmware's pseudo-terminal, plug it back
	FaultStall      = "stall"       // the line toward the firmware stops carrying bytes, then resumes
	FaultKillPlugin = "kill-plugin" // SIGKILL the plugin device's process (the agent restarts it)
	FaultKillEtcd   = "kill-etcd"   // SIGKILL the etcd leader, restart it (etcd store)
	FaultQuorumLoss = "quorum-loss" // SIGSTOP two etcd members, then SIGCONT (etcd store)
)

// DoubtFaults are the fault kinds after which a command may be answered
// in_doubt: its fate was lost with a process or a line.
var DoubtFaults = []string{FaultKillAgent, FaultKillPlugin, FaultUnplug, FaultStall}

// LineFaults are the fault kinds that hold bytes on a device's line: what
// the driver wrote during one may reach the device after it healed.
var LineFaults = []string{FaultUnplug, FaultStall}

// FaultPlan is one fault: Kind on Target from At for For.
type FaultPlan struct {
	At     time.Duration `json:"at"`
	For    time.Duration `json:"for"`
	Kind   string        `json:"kind"`
	Target string        `json:"target"`
	Delay  time.Duration `json:"delay,omitempty"` // FaultDelay: added latency
}

// PlanOptions are what the command line decides about a schedule.
type PlanOptions struct {
	Duration time.Duration
	Broker   string // "embedded" or "mosquitto"
	Store    string // "bbolt" or "etcd"
}

// NewPlan draws a schedule from seed.
func NewPlan(seed uint64, o PlanOptions) Plan {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := Plan{
		Seed: seed, Duration: o.Duration,
		TTL:     time.Duration(800+r.IntN(1200)) * time.Millisecond,
		Queue:   4 + r.IntN(5),
		Agents:  1 + r.IntN(2),
		Options: map[string]string{"broker": o.Broker, "store": o.Store},
	}
	p.Domains = drawDomains(r, p.Agents)
	for i := range 3 + r.IntN(3) {
		p.Supervisors = append(p.Supervisors, drawSupervisor(r, i, p))
	}
	p.Faults = drawFaults(r, p, o)
	return p
}

// drawDomains makes 2–3 domains over 4–6 devices: at least one firmware
// and one plugin device, the rest sim devices, at least two per domain
// where the count allows.
func drawDomains(r *rand.Rand, agents int) []DomainPlan {
	nd := 2 + r.IntN(2)
	ndev := max(4+r.IntN(3), 2*nd)
	if ndev > 6 {
		ndev = 6
	}
	kinds := []string{DeviceFirmware, DevicePlugin}
	for len(kinds) < ndev {
		kinds = append(kinds, DeviceSim)
	}
	r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	domains := make([]DomainPlan, nd)
	for i := range domains {
		domains[i] = DomainPlan{Name: fmt.Sprintf("d%d", i+1), Agent: i % agents}
	}
	for i, k := range kinds {
		d := &domains[i%nd]
		dev := DevicePlan{ID: fmt.Sprintf("%s%d", k, i+1), Kind: k, Latency: time.Duration(r.IntN(30)) * time.Millisecond}
		if k == DeviceSim && r.IntN(4) == 0 {
			dev.TimeoutEvery = 7 + r.IntN(10)
		}
		d.Devices = append(d.Devices, dev)
	}
	return domains
}

func drawSupervisor(r *rand.Rand, i int, p Plan) SupervisorPlan {
	s := SupervisorPlan{Name: fmt.Sprintf("sup%d", i+1)}
	for range 64 {
		d := p.Domains[r.IntN(len(p.Domains))].Name
		st := Step{Domain: d, Pick: r.Uint64()}
		switch n := r.IntN(20); {
		case n < 9:
			st.Kind = StepWork
			st.Commands = 1 + r.IntN(6)
			st.Retry = r.IntN(4) == 0
			st.Release = r.IntN(3) != 0
			if r.IntN(2) == 0 {
				st.Wait = p.TTL * time.Duration(1+r.IntN(3))
			}
		case n < 12:
			st.Kind = StepPipeline
			st.Commands = 1 + r.IntN(4)
			st.Wait = p.TTL * 2
		case n < 15:
			st.Kind = StepStale
			st.Commands = 1 + r.IntN(3)
			st.Sleep = p.TTL + time.Duration(r.IntN(int(2*p.TTL)))
		case n < 17:
			st.Kind = StepBurst
			st.Commands = p.Queue + 2 + r.IntN(6)
			st.Wait = p.TTL
		default:
			st.Kind = StepPause
			st.Sleep = time.Duration(100+r.IntN(900)) * time.Millisecond
		}
		s.Steps = append(s.Steps, st)
	}
	return s
}

// drawFaults draws overlapping faults over the first 80 % of the duration,
// each healed before the end.
func drawFaults(r *rand.Rand, p Plan, o PlanOptions) []FaultPlan {
	kinds := []string{FaultStop, FaultStop, FaultKillAgent, FaultKillCtrl, FaultKillBroker,
		FaultPartition, FaultPartition, FaultReset, FaultDelay, FaultUnplug, FaultStall, FaultKillPlugin}
	if o.Store == "etcd" {
		kinds = append(kinds, FaultKillEtcd, FaultQuorumLoss)
	}
	span := o.Duration * 8 / 10
	n := 1 + int(o.Duration/(2*time.Second))
	var faults []FaultPlan
	for range n {
		f := FaultPlan{Kind: kinds[r.IntN(len(kinds))], At: time.Duration(r.Int64N(int64(span)))}
		f.For = time.Duration(200+r.IntN(2800)) * time.Millisecond
		f.Target = drawTarget(r, f.Kind, p)
		switch f.Kind {
		case FaultStop:
			f.For = p.TTL + time.Duration(r.Int64N(int64(2*p.TTL)))
		case FaultDelay:
			f.Delay = time.Duration(5+r.IntN(300)) * time.Millisecond
		}
		if f.At+f.For > o.Duration {
			f.For = o.Duration - f.At
		}
		faults = append(faults, f)
	}
	slices.SortStableFunc(faults, func(a, b FaultPlan) int { return int(a.At - b.At) })
	return faults
}

// drawTarget picks what a fault of kind hits.
func drawTarget(r *rand.Rand, kind string, p Plan) string {
	switch kind {
	case FaultStop:
		return p.Supervisors[r.IntN(len(p.Supervisors))].Name
	case FaultKillAgent:
		return fmt.Sprintf("agent%d", 1+r.IntN(p.Agents))
	case FaultKillCtrl:
		names := p.controllerNames()
		return names[r.IntN(len(names))]
	case FaultKillBroker:
		return "broker"
	case FaultPartition, FaultReset, FaultDelay:
		links := p.controllerNames()
		for i := range p.Agents {
			links = append(links, fmt.Sprintf("agent%d", i+1))
		}
		for _, s := range p.Supervisors {
			links = append(links, s.Name)
		}
		return links[r.IntN(len(links))]
	case FaultUnplug, FaultStall:
		return p.deviceOfKind(DeviceFirmware)
	case FaultKillPlugin:
		return p.deviceOfKind(DevicePlugin)
	case FaultKillEtcd, FaultQuorumLoss:
		return "etcd"
	}
	return ""
}

// controllerNames names the controller processes: one on bbolt, two
// replicas on etcd.
func (p Plan) controllerNames() []string {
	if p.Options["store"] == "etcd" {
		return []string{"controller1", "controller2"}
	}
	return []string{"controller"}
}

// deviceOfKind returns the first device of kind.
func (p Plan) deviceOfKind(kind string) string {
	for _, d := range p.Domains {
		for _, dev := range d.Devices {
			if dev.Kind == kind {
				return dev.ID
			}
		}
	}
	return ""
}

// agentOf is the index of the agent serving device id.
func (p Plan) agentOf(id string) int {
	for _, d := range p.Domains {
		for _, dev := range d.Devices {
			if dev.ID == id {
				return d.Agent
			}
		}
	}
	return 0
}
