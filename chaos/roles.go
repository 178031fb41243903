package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/agent"
	"github.com/fencegate/fencegate/chaos/history"
	_ "github.com/fencegate/fencegate/devices/frame" // the firmware device
	_ "github.com/fencegate/fencegate/devices/sim"   // sim devices
	"github.com/fencegate/fencegate/lease/server"
	"github.com/fencegate/fencegate/plugins"
	"github.com/fencegate/fencegate/plugins/simdevice"
	"github.com/fencegate/fencegate/supervisor"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// RoleEnv names the environment variable that makes the fencechaos binary
// run as one part of the installation instead of the harness: the harness
// starts every part as a child process of its own binary.
const RoleEnv = "FENCECHAOS_ROLE"

// MaybeRunRole runs the part of the installation this process was started
// as — a role named by RoleEnv, or the plugin device when an agent started
// it — and exits; it returns only in the harness's own process.
func MaybeRunRole() {
	if plugins.IsPlugin() {
		simdevice.Main()
		os.Exit(0)
	}
	role := os.Getenv(RoleEnv)
	if role == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runRole(ctx, role, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fencechaos %s: %v\n", role, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runRole(ctx context.Context, role string, args []string) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	switch role {
	case "broker":
		return runBroker(ctx, args, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})))
	case "controller":
		return runController(ctx, args, log)
	case "agent":
		return runAgent(ctx, args, log)
	case "supervisor":
		return runSupervisor(ctx, args)
	case "firmware":
		return runFirmware(ctx, args)
	}
	return fmt.Errorf("unknown role %q", role)
}

// runBroker serves the embedded broker on args[0] until ctx is done,
// logging its sessions (connects, takeovers, disconnects) at debug level.
func runBroker(ctx context.Context, args []string, log *slog.Logger) error {
	if len(args) != 1 {
		return errors.New("usage: broker ADDR")
	}
	b, err := mqtt.StartEmbedded(args[0], log)
	if err != nil {
		return err
	}
	fmt.Println("ready", b.Addr())
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1) // the harness asks for the sessions when progress stalls
	for {
		select {
		case <-usr1:
			b.DescribeSessions(os.Stderr)
		case <-ctx.Done():
			return b.Close()
		}
	}
}

// runController runs lease/server with the config file args[0], as
// cmd/controller does.
func runController(ctx context.Context, args []string, log *slog.Logger) error {
	if len(args) != 1 {
		return errors.New("usage: controller CONFIG")
	}
	cfg, err := server.LoadConfig(args[0])
	if err != nil {
		return err
	}
	c, err := server.New(cfg, log)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// runAgent runs the agent with the config file args[0], as cmd/agent does.
func runAgent(ctx context.Context, args []string, log *slog.Logger) error {
	if len(args) != 1 {
		return errors.New("usage: agent CONFIG")
	}
	cfg, err := agent.LoadConfig(args[0])
	if err != nil {
		return err
	}
	a, err := agent.New(cfg, log)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// runSupervisor runs one supervisor of a plan: flags --plan FILE --name N
// --broker URL --history FILE --until UNIXNANO.
func runSupervisor(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("supervisor", flag.ContinueOnError)
	planPath := fs.String("plan", "", "plan file")
	name := fs.String("name", "", "supervisor name")
	broker := fs.String("broker", "", "broker URL")
	histPath := fs.String("history", "", "history file")
	until := fs.Int64("until", 0, "stop at this Unix time (ns)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	plan, err := readPlan(*planPath)
	if err != nil {
		return err
	}
	me, ok := plan.supervisor(*name)
	if !ok {
		return fmt.Errorf("no supervisor %q in the plan", *name)
	}
	rec, err := history.Create(*histPath)
	if err != nil {
		return err
	}
	defer rec.Close()
	c, err := dialSupervisor(ctx, *broker, me.Name)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("ready", me.Name)
	ctx, cancel := context.WithDeadline(ctx, time.Unix(0, *until))
	defer cancel()
	w := &worker{plan: plan, me: me, c: c, rec: rec, r: rand.New(rand.NewPCG(plan.Seed, uint64(len(me.Name))+rand.Uint64())),
		kept: map[string]*supervisor.Lease{}, released: map[*supervisor.Lease]bool{}}
	w.run(ctx)
	return nil
}

// dialSupervisor connects a supervisor named name through broker.
func dialSupervisor(ctx context.Context, broker, name string) (*supervisor.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return supervisor.Dial(dctx, supervisor.Config{
		MQTT:          mqtt.Config{Broker: broker, ClientID: "fencechaos-" + name, KeepAlive: 2 * time.Second, ConnectTimeout: 2 * time.Second, MaxReconnectInterval: time.Second},
		Holder:        name,
		RetryInterval: 300 * time.Millisecond,
	})
}

func readPlan(path string) (Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Plan{}, err
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return Plan{}, fmt.Errorf("plan %s: %w", path, err)
	}
	return p, nil
}

func (p Plan) supervisor(name string) (SupervisorPlan, bool) {
	for _, s := range p.Supervisors {
		if s.Name == name {
			return s, true
		}
	}
	return SupervisorPlan{}, false
}
