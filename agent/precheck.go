package agent

import (
	"fmt"
	"slices"

	"github.com/fencegate/fencegate/devices"
)

// checkDrivers checks every device's driver name and settings
// (devices.CheckSettings) before New opens anything, so a typo in the
// config is reported without creating the store or taking the broker port.
// Errors name the key path.
func checkDrivers(cfg Config) error {
	for i, dc := range cfg.Devices {
		if !slices.Contains(devices.Names(), dc.Driver) {
			return fmt.Errorf("devices[%d].driver: %q is not one of %v", i, dc.Driver, devices.Names())
		}
		s := devices.Settings{Node: &cfg.Devices[i].Settings, Path: fmt.Sprintf("devices[%d].settings", i)}
		if err := devices.CheckSettings(dc.Driver, s); err != nil {
			return err
		}
	}
	return nil
}
