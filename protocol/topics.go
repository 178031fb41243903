package protocol

import (
	"fmt"
	"strings"
)

// DefaultPrefix is the topic prefix of protocol v1.
const DefaultPrefix = "fencegate/v1"

// Topics builds protocol v1 topic names under one prefix. The zero value
// uses DefaultPrefix. Ids passed in must already be valid
// ([A-Za-z0-9._-]{1,128}); Topics does not check them.
type Topics struct {
	Prefix string
}

func (t Topics) prefix() string {
	if t.Prefix == "" {
		return DefaultPrefix
	}
	return t.Prefix
}

// DeviceCommands is where supervisors send commands for device.
func (t Topics) DeviceCommands(device string) string { return t.device(device, "commands") }

// DeviceResults is the default reply topic of device's commands.
func (t Topics) DeviceResults(device string) string { return t.device(device, "results") }

// DeviceState is device's retained state topic.
func (t Topics) DeviceState(device string) string { return t.device(device, "state") }

// AgentStatus is an agent's retained status topic (and its Will).
func (t Topics) AgentStatus(agent string) string {
	return t.prefix() + "/agents/" + agent + "/status"
}

// Lease is the topic of a lease operation ("acquire", "renew", "release",
// "get") on domain.
func (t Topics) Lease(domain, op string) string {
	return t.prefix() + "/leases/" + domain + "/" + op
}

// LeaseGrant is domain's retained grant announcement topic.
func (t Topics) LeaseGrant(domain string) string { return t.Lease(domain, "grant") }

// AllDeviceCommands is a filter matching every device's commands topic.
func (t Topics) AllDeviceCommands() string { return t.DeviceCommands("+") }

// AllLeaseOps is a filter matching every domain's lease operation topics.
func (t Topics) AllLeaseOps() string { return t.prefix() + "/leases/+/+" }

func (t Topics) device(device, leaf string) string {
	return t.prefix() + "/devices/" + device + "/" + leaf
}

// ParseDeviceTopic splits a device topic under the prefix into its device
// and leaf ("commands", "results", "state").
func (t Topics) ParseDeviceTopic(topic string) (device, leaf string, err error) {
	return t.parse2(topic, "/devices/")
}

// ParseLeaseTopic splits a lease topic under the prefix into its domain and
// op ("acquire", …, "grant").
func (t Topics) ParseLeaseTopic(topic string) (domain, op string, err error) {
	return t.parse2(topic, "/leases/")
}

func (t Topics) parse2(topic, kind string) (string, string, error) {
	rest, ok := strings.CutPrefix(topic, t.prefix()+kind)
	if !ok {
		return "", "", fmt.Errorf("protocol: topic %q is not under %s%s", topic, t.prefix(), kind)
	}
	a, b, ok := strings.Cut(rest, "/")
	if !ok || a == "" || b == "" || strings.Contains(b, "/") {
		return "", "", fmt.Errorf("protocol: topic %q is not %s%s<id>/<leaf>", topic, t.prefix(), kind)
	}
	return a, b, nil
}
