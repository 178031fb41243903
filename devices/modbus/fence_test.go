package modbus_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/devices/modbus"
	"github.com/fencegate/fencegate/hwtest/simmodbus"
)

// fenceRig is a rig whose PLC keeps a fence at holding 1000 in layout,
// refusing by exception or answering in a status register; point "near"
// is the register right after what the driver writes for the fence.
func fenceRig(t *testing.T, tr, layout string, status bool) (*rig, int) {
	t.Helper()
	words := 4
	if layout == modbus.LayoutEpochSeq {
		words = 8
	}
	near := 1000 + words
	if status {
		near++
	}
	plc := simmodbus.Config{Fence: &simmodbus.Fence{Address: 1000, Words: words, Status: status}}
	r := newRig(t, tr, plc, func(c *modbus.Config) {
		c.Fence = &modbus.FenceConfig{Address: ip(1000), Layout: layout}
		if status {
			c.Fence.Status = ip(1000 + words)
		}
		c.Points["near"] = pc("holding", near, "", true)
	})
	return r, near
}

// TestPLCFence: the PLC's own fence refuses a token below the highest it
// has seen — what the agent would let through after losing its store —
// with stale_token and the PLC's fence, and nothing of the command is
// written; the same lease and newer ones pass.
func TestPLCFence(t *testing.T) {
	for _, mode := range []string{"exception", "status"} {
		for _, layout := range []string{modbus.LayoutSeq, modbus.LayoutEpochSeq} {
			t.Run(mode+"/"+layout, func(t *testing.T) {
				both(t, func(t *testing.T, tr string) {
					r, near := fenceRig(t, tr, layout, mode == "status")
					checkPLCFence(t, r, near, layout)
				})
			})
		}
	}
}

func checkPLCFence(t *testing.T, r *rig, near int, layout string) {
	if _, err := r.applyTok(t, modbus.OpWrite, `{"u16":1,"near":1}`, token(1, 10)); err != nil {
		t.Fatal(err)
	}
	writes := len(r.plc.Log())
	_, err := r.applyTok(t, modbus.OpWrite, `{"u16":2,"near":2,"run":true}`, token(1, 9))
	expectStale(t, err, layout, 10)
	if got := r.plc.Holding(10, 1)[0] + r.plc.Holding(near, 1)[0]; got != 2 || r.plc.Coil(3) {
		t.Fatalf("after a stale refusal u16+near = %d, run %v: something of the stale command was written", got, r.plc.Coil(3))
	}
	if n := len(r.plc.Log()); n > writes+1 {
		t.Fatalf("%d writes for a stale command; at most its fence may be written", n-writes)
	}
	if _, err := r.applyTok(t, modbus.OpWrite, `{"u16":3}`, token(1, 10)); err != nil {
		t.Fatalf("the same lease again: %v", err)
	}
	_, err = r.applyTok(t, modbus.OpWrite, `{"u16":4}`, token(2, 1))
	if layout == modbus.LayoutSeq { // seq alone cannot see the epoch: a lower seq is refused (docs/modbus.md)
		expectStale(t, err, layout, 10)
		return
	}
	if err != nil {
		t.Fatalf("a newer epoch: %v", err)
	}
	_, err = r.applyTok(t, modbus.OpWrite, `{"u16":5}`, token(1, 11))
	expectStale(t, err, layout, 1)
}

func expectStale(t *testing.T, err error, layout string, seq uint64) {
	t.Helper()
	expectCode(t, err, devices.CodeStaleToken)
	var de *devices.Error
	if !errors.As(err, &de) || de.Fence == nil || de.Fence.Seq != seq {
		t.Fatalf("stale_token %v carries fence %+v, want the PLC's seq %d", err, de.Fence, seq)
	}
	if layout == modbus.LayoutSeq && de.Fence.Epoch != 0 {
		t.Fatalf("layout seq reports epoch %d; the PLC does not know it", de.Fence.Epoch)
	}
}

// TestFenceRequests: with a PLC that refuses by exception, the fence and
// the values beside it go in one FC 16; in status mode the fence goes
// alone (with the status zeroed) and the values only after the verdict.
func TestFenceRequests(t *testing.T) {
	tests := []struct {
		name   string
		status bool
		want   string
	}{
		{"exception: one request", false, "[{holding 1000 [0 0 0 7 9]}]"},
		{"status: fence, then values", true, "[{holding 1000 [0 0 0 7 0]} {holding 1005 [9]}]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := fenceRig(t, modbus.TCP, modbus.LayoutSeq, tt.status)
			if _, err := r.applyTok(t, modbus.OpWrite, `{"near":9}`, token(1, 7)); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range r.plc.Log() {
				got = append(got, fmt.Sprintf("{%s %d %v}", w.Table, w.Addr, w.Values))
			}
			if "["+strings.Join(got, " ")+"]" != tt.want {
				t.Fatalf("writes %v, want %s", got, tt.want)
			}
		})
	}
}

// TestFenceVerdictTimeout: a PLC program that never judges the fence (a
// stopped PLC) leaves the command without effect: device_timeout, no
// value written.
func TestFenceVerdictTimeout(t *testing.T) {
	r := newRig(t, modbus.TCP, simmodbus.Config{}, func(c *modbus.Config) { // the PLC has no program: status stays 0
		c.Fence = &modbus.FenceConfig{Address: ip(1000), Status: ip(1004), StatusTimeout: 100 * time.Millisecond}
	})
	_, err := r.applyTok(t, modbus.OpWrite, `{"u16":9}`, token(1, 7))
	expectCode(t, err, devices.CodeDeviceTimeout)
	if r.plc.Holding(10, 1)[0] != 0 {
		t.Fatal("a value was written without the PLC's verdict")
	}
}
