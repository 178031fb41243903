package plugins

// Attacks on the "never sent" answers of Host.Apply (a plugin found dead
// before the send, a call gRPC refused to start): a command that reached
// the plugin and acted must never be answered device_unavailable (I4: the
// supervisor would take it as not applied, and a retry of it would apply
// again). The plugin here acts — its device log gets the line, synced —
// and then dies before it answers, the closest a real death gets to the
// send.

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/plugins/internal/driverpb"
)

// dieConfig is the config of this test binary run as a plugin that dies
// right after acting (dieAfterApplyMain).
type dieConfig struct {
	// Die is "kill" (SIGKILL to itself) or "exit" (os.Exit) after the
	// device log has the command.
	Die string `yaml:"die_after_apply"`
	// Log is the device: Apply appends "applied <id>" and syncs.
	Log string `yaml:"log"`
}

// init runs this binary as the dying plugin when a host started it with a
// dieConfig (other configs leave it to the other plugin mains).
func init() {
	if !IsPlugin() {
		return
	}
	var dc dieConfig
	if yaml.Unmarshal([]byte(os.Getenv(EnvConfig)), &dc) != nil || dc.Die == "" {
		return
	}
	f, err := os.OpenFile(dc.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		os.Exit(1)
	}
	Serve(&dyingDevice{die: dc.Die, log: f})
	os.Exit(0)
}

// dyingDevice acts on the first command and dies before answering it.
type dyingDevice struct {
	die string
	log *os.File
}

func (d *dyingDevice) Apply(_ context.Context, cmd devices.Command) (json.RawMessage, error) {
	_, _ = d.log.WriteString("applied " + cmd.ID + "\n")
	_ = d.log.Sync()
	if d.die == "kill" {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Hour)
	}
	os.Exit(7)
	return nil, nil
}

func (d *dyingDevice) Describe() devices.Capabilities {
	return devices.Capabilities{Ops: map[string]devices.Op{"set": {}}}
}

func (d *dyingDevice) Close() error { return nil }

// A plugin that acted and then died (SIGKILL or exit) is answered in_doubt,
// never device_unavailable — neither by the exited check (the process was
// alive at the send) nor by neverSent (the call's stream existed). This
// attack HOLDS on the current code; it is kept as the record of it.
func TestHarnessAttackPluginDyingAfterActingIsInDoubt(t *testing.T) {
	for _, die := range []string{"kill", "exit"} {
		t.Run(die, func(t *testing.T) {
			log := t.TempDir() + "/device.log"
			cfg := Config{Path: os.Args[0], Config: yamlNode(t, dieConfig{Die: die, Log: log}),
				PingInterval: time.Hour, RestartBackoff: time.Hour, RestartBackoffMax: time.Hour}
			h := openChild(t, cfg)
			err := applyWithin(h, 20*time.Second, "c1")
			if got := deviceLog(t, log); !contains(got, "applied c1") {
				t.Fatalf("the plugin did not act on c1 (log %q); the attack did not happen", got)
			}
			if code := devices.CodeOf(err); code != devices.CodeInDoubt {
				t.Fatalf("a command the plugin acted on, then died: answered %q (%v), want in_doubt", code, err)
			}
		})
	}
}

// bridgeServer is a driver plugin not built on the SDK (the protocol
// allows any gRPC server of driverpb): a bridge to a networked device
// gateway that, like most Go code, returns its upstream's error as is. It
// writes the command to the gateway (the device acts: applied is set),
// the gateway connection drops, the bridge's redial fails, and the
// upstream gRPC error — "transport: error while dialing" — becomes the
// answer of Apply. driverpb says a gRPC error "means the plugin itself
// failed": the plugin acted and then failed, so the command is in doubt.
type bridgeServer struct {
	driverpb.UnimplementedDriverServer
	mu      sync.Mutex
	applied []string
}

func (b *bridgeServer) Describe(context.Context, *driverpb.DescribeRequest) (*driverpb.DescribeResponse, error) {
	return &driverpb.DescribeResponse{Ops: map[string]*driverpb.Op{"set": {}}}, nil
}

func (b *bridgeServer) Apply(_ context.Context, req *driverpb.ApplyRequest) (*driverpb.ApplyResponse, error) {
	b.mu.Lock()
	b.applied = append(b.applied, req.GetId())
	b.mu.Unlock()
	return nil, status.Error(codes.Unavailable,
		`connection error: desc = "transport: error while dialing: dial tcp 10.0.0.7:7001: connect: connection refused"`)
}

func (b *bridgeServer) Health(context.Context, *driverpb.HealthRequest) (*driverpb.HealthResponse, error) {
	return &driverpb.HealthResponse{Available: true}, nil
}

func (b *bridgeServer) got() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.applied...)
}

// bridgePlugin registers a bridgeServer under the driver plugin's name.
type bridgePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	srv *bridgeServer
}

func (p *bridgePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	driverpb.RegisterDriverServer(s, p.srv)
	return nil
}

func (p *bridgePlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, nil // plugin side only
}

// Found by an attack on the fault harness (I4): a command that reached the plugin and acted is answered
// device_unavailable "the command was not sent", because neverSent judges
// by the words of the status message, which the plugin's own answer can
// carry. The supervisor takes the command as not applied; the agent's
// journal records a failure, so nothing marks it in doubt.
func TestHarnessAttackPluginAnswerWordedLikeDialFailureIsNotNeverSent(t *testing.T) {
	srv := &bridgeServer{}
	ctx, cancel := context.WithCancel(context.Background())
	rcCh := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	go plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{ProtocolVersion: {PluginName: &bridgePlugin{srv: srv}}},
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger:           hclog.NewNullLogger(),
		Test:             &plugin.ServeTestConfig{Context: ctx, ReattachConfigCh: rcCh, CloseCh: closed},
	})
	var rc *plugin.ReattachConfig
	select {
	case rc = <-rcCh:
	case <-closed:
		cancel()
		t.Fatal("test server stopped before serving")
	}
	h, err := Attach("dev1", rc, Config{PingInterval: time.Hour}, nil)
	if err != nil {
		cancel()
		<-closed
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Close()
		cancel()
		<-closed
	})
	err = applyWithin(h, 10*time.Second, "c1")
	if got := srv.got(); len(got) != 1 || got[0] != "c1" {
		t.Fatalf("the plugin got %q, want c1 once: the attack did not happen", got)
	}
	if code := devices.CodeOf(err); code != devices.CodeInDoubt {
		t.Fatalf("a command the plugin received and acted on is answered %q: %v — want in_doubt", code, err)
	}
}
