package line

import (
	"io"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
)

const readOnlyErr = "ERR -221 channel 8 is read-only\r\n"

// TestAttackAttributeCutByDeadline breaks the drivers' rule (I2/I4: a
// command that may have reached the device is in_doubt, never failed):
// after a command without a reply, the next command's reply is only to be
// taken if no second reply follows within settle — but when the command's
// deadline falls inside that settle window, attribute returns the first
// reply as the answer. Here the first reply is the late ERR of the command
// that timed out, and the next command's own OK follows within settle (the
// device keeps the documented contract: every answer within settle), yet
// the next command is reported failed (device_error) although the device
// applied it.
func TestAttackAttributeCutByDeadline(t *testing.T) {
	const settle = 3 * time.Second
	release := make(chan struct{})
	var mu sync.Mutex
	var lateAt time.Time
	in := newScriptedInstrument(t, func(l string, w io.Writer) {
		if l != "SET 1 on" {
			return // "SET 8 x": its ERR comes late, when the next request arrives
		}
		w.Write([]byte(readOnlyErr)) // the late answer to SET 8 x
		mu.Lock()
		lateAt = time.Now()
		mu.Unlock()
		<-release
		w.Write([]byte("OK\r\n")) // SET 1 on's own answer
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	cfg := testConfig(in.path)
	cfg.Settle = settle
	d := mustOpen(t, cfg)
	if _, err := apply(d, "set", `{"ch":8,"value":"x"}`, 300*time.Millisecond); devices.CodeOf(err) != devices.CodeInDoubt {
		t.Fatalf("SET 8 x without a reply: %v, want in_doubt", err)
	}
	// Deadline: the settle period, then half of the attribution window.
	_, err := apply(d, "set", `{"ch":1,"value":"on"}`, settle+settle/2)
	close(release)
	mu.Lock()
	since := time.Since(lateAt)
	mu.Unlock()
	if devices.CodeOf(err) == devices.CodeDeviceTimeout {
		t.Fatalf("SET 1 on: %v: the line did not settle before the deadline (machine too slow for this test)", err)
	}
	if devices.CodeOf(err) != devices.CodeInDoubt {
		t.Fatalf("SET 1 on answered %v (%s after the late ERR, its own OK follows now, within settle %v); want in_doubt", err, since.Round(time.Millisecond), settle)
	}
}

// TestAttackDuplicateReplyAnswersNext breaks the same rule with a device
// that answers twice (a repeated ERR, as noisy firmware or a converter that
// retransmits does): the first command got its answer in time, so the
// driver does not suspect the line, and the duplicate — arriving after the
// next request was sent — is taken as the next command's answer. The next
// command is reported failed (device_error) although the device applied it
// (its own OK follows at once). Two reply lines to one request can only
// mean one of them is not its answer: in_doubt.
func TestAttackDuplicateReplyAnswersNext(t *testing.T) {
	in := newInstrument(t, map[string]string{
		"SET 8 x":  readOnlyErr,
		"SET 1 on": readOnlyErr + "OK\r\n", // SET 8 x's duplicate, then SET 1 on's own answer
	})
	cfg := testConfig(in.path)
	cfg.CheckEveryReply = true // by default a device answering twice is a documented residual risk
	d := mustOpen(t, cfg)
	if _, err := apply(d, "set", `{"ch":8,"value":"x"}`, 10*time.Second); devices.CodeOf(err) != devices.CodeDeviceError {
		t.Fatalf("SET 8 x: %v, want its device_error", err)
	}
	out, err := apply(d, "set", `{"ch":1,"value":"on"}`, 10*time.Second)
	if devices.CodeOf(err) != devices.CodeInDoubt {
		t.Fatalf("SET 1 on answered %s, %v (the device sent ERR then OK); want in_doubt", out, err)
	}
}
