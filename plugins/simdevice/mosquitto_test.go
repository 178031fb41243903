package simdevice

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/devices/mqttrelay/relaytest"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// TestMosquittoACLKeepsTheAgentTheSolePath runs a real Mosquitto with
// deploy/mosquitto's ACL and passwords (invariant I7): the agent (plugin
// and relayed devices) works through it, and a supervisor's direct publish
// to the relayed controller's command topic never reaches the controller.
func TestMosquittoACLKeepsTheAgentTheSolePath(t *testing.T) {
	broker := startMosquitto(t)
	plug := relaytest.Start(t, relaytest.Options{Broker: broker, Base: "plant/relays/plug1",
		ClientID: "plug1", Username: "plug1", Password: "plug1-example"})
	e := startAgent(t, broker, "agent-gw1", "agent-gw1-example")
	e.waitState(t, "plug1", true)

	// The supervisor publishes straight to the controller: the broker acks
	// (MQTT 3.1.1 has no way to refuse) and drops it.
	direct := e.sup.Client().Publish(relaytest.CommandTopic("plant/relays/plug1"), 1, false, "ON")
	if err := mqtt.Wait(direct, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	e.mustApply(t, "pump1", e.cmd("p1", 1, "set", `{"value":1}`))
	e.mustApply(t, "plug1", e.cmd("r1", 1, "power", `{"state":"OFF"}`))
	// The direct publish was acknowledged before the fenced command was
	// sent; had the broker routed it, the controller would have it first.
	if got := plug.WaitReceived(1); fmt.Sprint(got) != "[OFF]" {
		t.Fatalf("controller received %q, want only the fenced [OFF]", got)
	}
	if plug.Power() != "OFF" {
		t.Fatalf("plug is %s", plug.Power())
	}
	checkLog(t, filepath.Join(e.dir, "apply.log"), "p1")
}

// TestMosquittoRefusesWrongPassword: the password file is in force.
func TestMosquittoRefusesWrongPassword(t *testing.T) {
	broker := startMosquitto(t)
	opts := paho.NewClientOptions().AddBroker(broker).SetClientID("intruder").
		SetUsername("sup-a").SetPassword("wrong").SetConnectRetry(false).SetAutoReconnect(false)
	c := paho.NewClient(opts)
	if err := mqtt.Wait(c.Connect(), 10*time.Second); err == nil {
		c.Disconnect(100)
		t.Fatal("connected with a wrong password")
	}
}

// startMosquitto runs mosquitto with deploy/mosquitto's files on a free
// loopback port until the test ends, and returns its URL. It skips the
// test if mosquitto is not installed.
func startMosquitto(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/mosquitto"); serr != nil {
			t.Skip("mosquitto is not installed (apt-get install mosquitto); CI installs it")
		}
		bin = "/usr/sbin/mosquitto"
	}
	deploy, err := filepath.Abs("../../deploy/mosquitto")
	if err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	host, port, _ := net.SplitHostPort(addr)
	conf := filepath.Join(t.TempDir(), "mosquitto.conf")
	text := fmt.Sprintf("listener %s %s\nallow_anonymous false\npassword_file %s\nacl_file %s\npersistence false\n",
		port, host, filepath.Join(deploy, "passwd"), filepath.Join(deploy, "acl"))
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", conf)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	waitListening(t, addr, out)
	return "tcp://" + addr
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitListening(t *testing.T, addr string, out *lockedBuffer) {
	t.Helper()
	for range 200 {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("mosquitto is not listening on %s; its output:\n%s", addr, out.String())
}

// TestMosquittoACLOnlyControllerWritesGrants: under deploy/mosquitto's ACL
// a supervisor cannot clear or overwrite a grant topic (only the controller
// writes them), and it reads replies only in its own part of the reply
// namespace (issue 11, items 4 and 11).
func TestMosquittoACLOnlyControllerWritesGrants(t *testing.T) {
	broker := startMosquitto(t)
	grant := "fencegate/v1/leases/plant/grant"
	ctl := aclClient(t, broker, "controller", "controller")
	seen := make(chan string, 16)
	if err := mqtt.Wait(ctl.Subscribe(grant, 1, func(_ paho.Client, m paho.Message) { seen <- string(m.Payload()) }), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	sup := aclClient(t, broker, "sup-a", "sup-a")
	for _, payload := range []string{`{"token":"forged"}`, ""} { // an overwrite, then a clear
		if err := mqtt.Wait(sup.Publish(grant, 1, true, payload), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := mqtt.Wait(ctl.Publish(grant, 1, true, `{"token":"from-the-controller"}`), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-seen: // the controller's own publish is the barrier: the supervisor's came first
		if got != `{"token":"from-the-controller"}` {
			t.Fatalf("a supervisor's publish reached the grant topic: %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the controller's grant never arrived")
	}

	// Replies: sup-a reads fencegate/v1/replies/sup-a/..., not another client's.
	own, other := make(chan string, 4), make(chan string, 4)
	for topic, ch := range map[string]chan string{"fencegate/v1/replies/sup-a/#": own, "fencegate/v1/replies/sup-b/#": other} {
		ch := ch
		sup.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) { ch <- m.Topic() }).WaitTimeout(10 * time.Second)
	}
	for _, topic := range []string{"fencegate/v1/replies/sup-b/x", "fencegate/v1/replies/sup-a/x"} {
		if err := mqtt.Wait(ctl.Publish(topic, 1, false, "r"), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case got := <-own:
		if got != "fencegate/v1/replies/sup-a/x" {
			t.Fatalf("sup-a got %s", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sup-a's own reply never arrived")
	}
	select {
	case got := <-other:
		t.Fatalf("sup-a read another client's reply on %s", got)
	default:
	}
}

// aclClient connects to the ACL'd broker as user with client id id and
// deploy/mosquitto's example password.
func aclClient(t *testing.T, broker, user, id string) paho.Client {
	t.Helper()
	opts := paho.NewClientOptions().AddBroker(broker).SetClientID(id).
		SetUsername(user).SetPassword(user + "-example").SetConnectRetry(false).SetAutoReconnect(false)
	c := paho.NewClient(opts)
	if err := mqtt.Wait(c.Connect(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}
