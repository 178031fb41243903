package chaos

import (
	"reflect"
	"testing"
	"time"
)

var testPlanOptions = PlanOptions{Duration: 20 * time.Second, Broker: "embedded", Store: "bbolt"}

// The same seed gives the same schedule; another seed another one.
func TestPlanIsDrawnFromTheSeed(t *testing.T) {
	a, b := NewPlan(42, testPlanOptions), NewPlan(42, testPlanOptions)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two plans of seed 42 differ")
	}
	if c := NewPlan(43, testPlanOptions); reflect.DeepEqual(a.Faults, c.Faults) && reflect.DeepEqual(a.Supervisors, c.Supervisors) {
		t.Fatal("plans of seeds 42 and 43 have the same faults and workload")
	}
}

// Every plan has the installation the harness promises: 2–3 domains over
// 4–6 devices with a firmware and a plugin device, several devices per
// domain, 3–5 supervisors, 1–2 agents, and faults that heal before the end.
func TestPlanShape(t *testing.T) {
	kinds := map[string]int{}
	for seed := uint64(1); seed <= 300; seed++ {
		p := NewPlan(seed, testPlanOptions)
		if n := len(p.Domains); n < 2 || n > 3 {
			t.Fatalf("seed %d: %d domains", seed, n)
		}
		if n := len(p.Supervisors); n < 3 || n > 5 {
			t.Fatalf("seed %d: %d supervisors", seed, n)
		}
		if p.Agents < 1 || p.Agents > 2 {
			t.Fatalf("seed %d: %d agents", seed, p.Agents)
		}
		devices := 0
		for _, d := range p.Domains {
			if len(d.Devices) < 2 {
				t.Fatalf("seed %d: domain %s has %d devices", seed, d.Name, len(d.Devices))
			}
			devices += len(d.Devices)
		}
		if devices < 4 || devices > 6 || p.deviceOfKind(DeviceFirmware) == "" || p.deviceOfKind(DevicePlugin) == "" {
			t.Fatalf("seed %d: %d devices, firmware %q, plugin %q", seed, devices, p.deviceOfKind(DeviceFirmware), p.deviceOfKind(DevicePlugin))
		}
		for _, f := range p.Faults {
			if f.At < 0 || f.For < 0 || f.At+f.For > p.Duration || f.Target == "" {
				t.Fatalf("seed %d: fault %+v outside the schedule or without target", seed, f)
			}
			kinds[f.Kind]++
		}
		for _, s := range p.Supervisors {
			for _, st := range s.Steps {
				kinds["step-"+st.Kind]++
			}
		}
	}
	for _, k := range []string{FaultStop, FaultKillAgent, FaultKillCtrl, FaultKillBroker, FaultPartition, FaultReset,
		FaultDelay, FaultUnplug, FaultStall, FaultKillPlugin,
		"step-" + StepWork, "step-" + StepPipeline, "step-" + StepStale, "step-" + StepBurst, "step-" + StepPause} {
		if kinds[k] == 0 {
			t.Errorf("no plan of 300 seeds draws %s", k)
		}
	}
}

// With the etcd store the plan has two controller replicas and etcd faults.
func TestPlanEtcd(t *testing.T) {
	o := testPlanOptions
	o.Store = "etcd"
	etcdFaults := 0
	for seed := uint64(1); seed <= 100; seed++ {
		p := NewPlan(seed, o)
		if got := p.controllerNames(); len(got) != 2 {
			t.Fatalf("controllers = %v, want two replicas", got)
		}
		for _, f := range p.Faults {
			if f.Kind == FaultKillEtcd || f.Kind == FaultQuorumLoss {
				etcdFaults++
			}
		}
	}
	if etcdFaults == 0 {
		t.Fatal("no etcd faults in 100 plans with the etcd store")
	}
}
