package plugins

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/fencegate/fencegate/devices"
)

// supervise watches inst until it is lost, then restarts the plugin with
// backoff, until Close. It owns the instances it starts and kills them.
func (h *Host) supervise(inst *instance) {
	defer close(h.done)
	delay := h.cfg.RestartBackoff
	for inst != nil {
		why, stopped := h.watch(inst)
		h.drop(inst, stopped)
		if stopped {
			return
		}
		h.log.Warn("plugin lost; restarting", "reason", why, "ran_for", time.Since(inst.started).Round(time.Millisecond))
		h.report(false, "plugin lost: "+why)
		if time.Since(inst.started) > h.cfg.RestartBackoffMax {
			delay = h.cfg.RestartBackoff
		}
		inst, delay = h.restart(delay)
	}
}

// watch pings inst every PingInterval. It returns why inst was lost, or
// stopped = true after Close.
func (h *Host) watch(inst *instance) (why string, stopped bool) {
	t := time.NewTicker(h.cfg.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return "", true
		case <-inst.lost:
			return inst.why, false
		case <-t.C:
			if why := h.ping(inst); why != "" {
				return why, false
			}
		}
	}
}

// ping checks that inst's process lives and answers Health, and reports
// the device availability it answers. It returns why inst is lost, or "".
func (h *Host) ping(inst *instance) string {
	if inst.client.Exited() {
		return "plugin process exited"
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.PingInterval)
	defer cancel()
	ok, reason, err := inst.drv.health(ctx)
	if err != nil {
		return err.Error()
	}
	if !ok && reason == "" {
		reason = "plugin reports its device unavailable"
	}
	h.report(ok, reason)
	return ""
}

// drop takes inst out of service and ends its process: gracefully after
// Close when no command is in it, else at once (a lost plugin, or one that
// Close found running a command, may still be acting on it: a graceful
// stop would let the plugin SDK close the driver under that command).
func (h *Host) drop(inst *instance, closing bool) {
	h.mu.Lock()
	if h.cur == inst {
		h.cur = nil
	}
	h.mu.Unlock()
	if closing && h.idle() {
		inst.stop()
		return
	}
	inst.kill()
}

// idle reports whether no Apply is in the plugin, and keeps it so: the
// busy token it takes is never given back (drop runs only at the end).
func (h *Host) idle() bool {
	select {
	case h.busy <- struct{}{}:
		return true
	default:
		return false
	}
}

// restart starts the plugin again after delay, doubling the delay (up to
// RestartBackoffMax) after each failed start. It returns the new instance
// and the delay for the next restart, or nil after Close.
func (h *Host) restart(delay time.Duration) (*instance, time.Duration) {
	for {
		if !h.sleep(delay) || h.launch == nil {
			h.waitStop()
			return nil, delay
		}
		next := min(2*delay, h.cfg.RestartBackoffMax)
		inst, err := h.start()
		if err == nil {
			return inst, next
		}
		if errors.Is(err, errClosed) {
			return nil, delay
		}
		h.log.Warn("plugin restart failed", "err", err, "retry_in", next)
		delay = next
	}
}

// start launches the plugin and puts it in service, unless Close came first.
func (h *Host) start() (*instance, error) {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.StartTimeout)
	defer cancel()
	inst, err := h.launch(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	closed := h.closed
	if !closed {
		h.cur = inst
	}
	h.mu.Unlock()
	if closed {
		inst.stop()
		return nil, errClosed
	}
	h.checkCaps(inst.drv.Describe())
	h.log.Info("plugin restarted")
	h.report(true, "plugin restarted")
	return inst, nil
}

// checkCaps warns if a restarted plugin describes other ops than the first
// start: the agent keeps the first.
func (h *Host) checkCaps(c devices.Capabilities) {
	if c.ChecksTokens != h.caps.ChecksTokens || !maps.Equal(c.Ops, h.caps.Ops) {
		h.log.Warn("restarted plugin describes other capabilities; keeping those of its first start")
	}
}

// sleep waits d; false if Close came first.
func (h *Host) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-h.stop:
		return false
	}
}

func (h *Host) waitStop() { <-h.stop }
