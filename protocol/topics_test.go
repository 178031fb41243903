package protocol

import "testing"

func TestTopicsRoundTrip(t *testing.T) {
	tests := []struct {
		name, topic, a, b string
		lease, bad        bool
	}{
		{name: "commands", topic: Topics{}.DeviceCommands("pump-1"), a: "pump-1", b: "commands"},
		{name: "grant", topic: Topics{}.LeaseGrant("plant.a"), a: "plant.a", b: "grant", lease: true},
		{name: "custom prefix", topic: Topics{Prefix: "x/y"}.DeviceState("d"), bad: true},
		{name: "too deep", topic: "fencegate/v1/devices/a/b/c", bad: true},
		{name: "empty id", topic: "fencegate/v1/devices//commands", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parse := Topics{}.ParseDeviceTopic
			if tc.lease {
				parse = Topics{}.ParseLeaseTopic
			}
			a, b, err := parse(tc.topic)
			if tc.bad {
				if err == nil {
					t.Fatalf("%q parsed as %q %q", tc.topic, a, b)
				}
				return
			}
			if err != nil || a != tc.a || b != tc.b {
				t.Fatalf("%q: %q %q %v", tc.topic, a, b, err)
			}
		})
	}
}
