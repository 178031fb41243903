package agent

import (
	"errors"
	"fmt"

	"github.com/fencegate/fencegate/transport/mqtt"
)

// validateEmbedded checks the embedded broker's security keys (they apply
// only without mqtt.broker): an exposed anonymous broker is refused here,
// naming the keys that fix it.
func (m MQTTConfig) validateEmbedded() error {
	if m.Broker != "" {
		return nil
	}
	if err := m.ServerTLS.Validate("mqtt.server_tls"); err != nil {
		return err
	}
	hasAuth := m.PasswordFile != "" || m.ServerTLS.ClientCA != ""
	if !hasAuth && !m.AllowAnonymous && !mqtt.IsLoopback(m.Listen) {
		return fmt.Errorf("mqtt.listen: %q is not a loopback address and the embedded broker would admit anyone: "+
			"set mqtt.password_file or mqtt.server_tls.client_ca, or mqtt.allow_anonymous: true", m.Listen)
	}
	return nil
}

// startEmbedded starts the embedded broker with the configured listener,
// TLS, users and anonymous policy.
func (a *Agent) startEmbedded() (*mqtt.Embedded, error) {
	m := a.cfg.MQTT
	o := mqtt.EmbeddedOptions{Addr: m.Listen, MaxPacket: a.maxPacket(), Logger: a.log.With("component", "broker"),
		AllowAnonymous: m.AllowAnonymous}
	var err error
	if m.PasswordFile != "" {
		if o.Users, err = mqtt.LoadPasswordFile(m.PasswordFile); err != nil {
			return nil, fmt.Errorf("mqtt.password_file: %w", err)
		}
	}
	if m.ServerTLS.Enabled() {
		if o.TLS, err = m.ServerTLS.Config("mqtt.server_tls"); err != nil {
			return nil, err
		}
	}
	b, err := mqtt.StartEmbeddedWith(o)
	if errors.Is(err, mqtt.ErrAnonymousExposed) {
		return nil, fmt.Errorf("mqtt.listen: %w (set mqtt.allow_anonymous: true to allow it)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("mqtt.listen: %w", err)
	}
	return b, nil
}

// dialURL is the broker the agent's own client and its drivers connect
// to: the embedded broker's internal URL (a credential, never logged) or
// mqtt.broker.
func (a *Agent) dialURL() string {
	if a.broker != nil {
		return a.broker.InternalURL()
	}
	return a.cfg.MQTT.Broker
}
