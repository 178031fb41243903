package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/plugins/internal/driverpb"
)

// driverPlugin is the go-plugin glue of the driver kind: on the plugin side
// it registers impl's gRPC server, on the host side it makes a grpcClient.
type driverPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl      devices.Driver // plugin side only
	maxOutput int            // plugin side only: the output cap
}

var _ plugin.GRPCPlugin = (*driverPlugin)(nil)

// GRPCServer registers the driver service for p.impl.
func (p *driverPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	driverpb.RegisterDriverServer(s, newGRPCServer(p.impl, p.maxOutput))
	return nil
}

// GRPCClient returns a *grpcClient over conn.
func (p *driverPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &grpcClient{rpc: driverpb.NewDriverClient(conn)}, nil
}

// grpcServer serves one devices.Driver. It keeps the Driver contract for
// the plugin author (Apply is never called concurrently) without queueing:
// a command that arrives while an earlier one is still running (the host
// gave up on it) is refused with device_unavailable, and a command whose
// deadline has passed is refused with device_timeout, both without calling
// the driver — a command that waited inside the plugin would reach the
// device long after the agent's last fence check.
type grpcServer struct {
	driverpb.UnimplementedDriverServer
	impl      devices.Driver
	maxOutput int           // a larger output is dropped before sending
	slot      chan struct{} // one token: held while impl.Apply runs
	avail     availability
}

func newGRPCServer(impl devices.Driver, maxOutput int) *grpcServer {
	s := &grpcServer{impl: impl, maxOutput: maxOutput, slot: make(chan struct{}, 1)}
	s.avail.set(true, "")
	if r, ok := impl.(devices.AvailabilityReporter); ok {
		r.OnAvailability(s.avail.set)
	}
	return s
}

// Describe returns impl's capabilities.
func (s *grpcServer) Describe(context.Context, *driverpb.DescribeRequest) (*driverpb.DescribeResponse, error) {
	return capsToPB(s.impl.Describe()), nil
}

// Apply runs one command through impl with a ctx that ends at the
// command's deadline (or when the host cancels the call). A driver failure
// is a Failure in the response, not a gRPC error; so is an output over the
// cap, which is not sent.
func (s *grpcServer) Apply(ctx context.Context, req *driverpb.ApplyRequest) (*driverpb.ApplyResponse, error) {
	select {
	case s.slot <- struct{}{}:
	default:
		return failed(devices.Errorf(devices.CodeDeviceUnavailable,
			"an earlier command is still running in the plugin; this one was not started")), nil
	}
	defer func() { <-s.slot }()
	ctx, cancel := commandContext(ctx, req.GetDeadlineUnixNano())
	defer cancel()
	if ctx.Err() != nil {
		return failed(devices.Errorf(devices.CodeDeviceTimeout,
			"the command's deadline passed before it reached the driver; it was not started")), nil
	}
	out, err := s.impl.Apply(ctx, commandFromPB(req))
	if err != nil {
		return failed(err), nil
	}
	if n := len(out); n > s.maxOutput {
		return failed(outputDropped(fmt.Sprintf("its output of %d bytes", n))), nil
	}
	return &driverpb.ApplyResponse{Output: out}, nil
}

func failed(err error) *driverpb.ApplyResponse {
	return &driverpb.ApplyResponse{Failure: failureToPB(err)}
}

// commandContext is ctx ending also at deadline (Unix nanoseconds; 0 for
// none).
func commandContext(ctx context.Context, deadline int64) (context.Context, context.CancelFunc) {
	if deadline == 0 {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, time.Unix(0, deadline))
}

// Health reports the availability impl last reported (available if it
// reports none).
func (s *grpcServer) Health(context.Context, *driverpb.HealthRequest) (*driverpb.HealthResponse, error) {
	ok, reason := s.avail.get()
	return &driverpb.HealthResponse{Available: ok, Reason: reason}, nil
}

// availability is the latest availability report; safe for concurrent use.
type availability struct {
	mu     sync.Mutex // guards ok and reason
	ok     bool
	reason string
}

func (a *availability) set(ok bool, reason string) {
	a.mu.Lock()
	a.ok, a.reason = ok, reason
	a.mu.Unlock()
}

func (a *availability) get() (bool, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ok, a.reason
}

// Size limits of one Apply call, host side.
const (
	// maxRequestBytes bounds a command sent to a plugin, well below the
	// 4 MiB a gRPC server accepts by default: a larger one is refused
	// before sending, so a call failing with ResourceExhausted always
	// means the plugin's answer was too large.
	maxRequestBytes = 1 << 20
	// maxAnswerBytes bounds a plugin's answer as gRPC receives it: the
	// output cap plus room for a failure's message. gRPC refuses a larger
	// message from its length prefix, before buffering it.
	maxAnswerBytes = devices.MaxOutputBytes + 16<<10
)

// grpcClient is the host's view of one running plugin, without restarts
// (Host adds those). Its methods may be called concurrently; Describe
// returns what describe fetched.
type grpcClient struct {
	rpc  driverpb.DriverClient
	caps devices.Capabilities // set by describe, before first use
}

// describe fetches and keeps the plugin's capabilities.
func (c *grpcClient) describe(ctx context.Context) error {
	resp, err := c.rpc.Describe(ctx, &driverpb.DescribeRequest{})
	if err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	c.caps = capsFromPB(resp)
	return nil
}

// apply sends cmd to the plugin with ctx's deadline in the request, and
// waits for the plugin's answer until grace after ctx is done. A failure of
// the device comes back as its *devices.Error; an answer over the output
// cap is device_error; a call that ends without an answer is in_doubt,
// wrapping ErrOverrun if the grace ran out, else ErrPluginLost. The caller
// must kill the plugin after either: it may still act on cmd.
func (c *grpcClient) apply(ctx context.Context, cmd devices.Command, grace time.Duration) (json.RawMessage, error) {
	req := commandToPB(cmd)
	if dl, ok := ctx.Deadline(); ok {
		req.DeadlineUnixNano = dl.UnixNano()
	}
	if n := proto.Size(req); n > maxRequestBytes {
		return nil, devices.Errorf(devices.CodeDeviceError,
			"command of %d bytes is over the plugin limit of %d; it was not sent", n, maxRequestBytes)
	}
	call, stop := callContext(ctx, grace)
	defer stop()
	resp, err := c.rpc.Apply(call, req, grpc.MaxCallRecvMsgSize(maxAnswerBytes))
	if err != nil {
		return nil, callError(call, grace, err)
	}
	return answerOf(resp)
}

// callContext is the context of one Apply call for ctx: it carries none of
// ctx's cancellation but ends grace after ctx is done, so the plugin's own
// answer to a command whose deadline passed still arrives. stop releases
// it and the goroutine that ends it.
func callContext(ctx context.Context, grace time.Duration) (call context.Context, stop func()) {
	call, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopAfter := context.AfterFunc(ctx, func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-call.Done():
		}
	})
	return call, func() { stopAfter(); cancel() }
}

// answerOf is the plugin's answer: its output, capped at
// devices.MaxOutputBytes, or its failure.
func answerOf(resp *driverpb.ApplyResponse) (json.RawMessage, error) {
	if f := resp.GetFailure(); f != nil {
		return nil, failureFromPB(f)
	}
	if n := len(resp.Output); n > devices.MaxOutputBytes {
		return nil, outputDropped(fmt.Sprintf("its output of %d bytes", n))
	}
	if len(resp.Output) == 0 {
		return nil, nil
	}
	return resp.Output, nil
}

// outputDropped is the answer of a command that acted but whose output was
// too large (devices.CodeOutputDropped: the agent answers it applied).
func outputDropped(what string) error {
	return devices.Errorf(devices.CodeOutputDropped,
		"the command reached the device, but %s is over the cap of %d bytes and was dropped", what, devices.MaxOutputBytes)
}

// health asks the plugin whether its device is reachable.
func (c *grpcClient) health(ctx context.Context) (bool, string, error) {
	resp, err := c.rpc.Health(ctx, &driverpb.HealthRequest{})
	if err != nil {
		return false, "", fmt.Errorf("%w: health: %w", ErrPluginLost, err)
	}
	return resp.Available, resp.Reason, nil
}

// Describe returns the capabilities fetched when the plugin started.
func (c *grpcClient) Describe() devices.Capabilities { return c.caps }

// callError maps an Apply call that ended without a readable answer. call
// is the call's context (callContext). Every case is in doubt: the plugin
// may have acted on the command. (A gRPC error's text cannot tell a call
// that never left the host from one the plugin answered with that error
// itself, so none is taken for "not sent"; Host.Apply checks beforehand
// whether the plugin process exited.)
func callError(call context.Context, grace time.Duration, err error) error {
	switch {
	case status.Code(err) == codes.ResourceExhausted:
		// The plugin answered, too much to read: whether it applied the
		// command or refused it cannot be told.
		return &devices.Error{Code: devices.CodeInDoubt,
			Message: fmt.Sprintf("the plugin's answer was over the %d-byte limit and could not be read; the command may have reached the device", maxAnswerBytes),
			Err:     err}
	case call.Err() != nil:
		return &devices.Error{Code: devices.CodeInDoubt,
			Message: fmt.Sprintf("plugin did not answer within %v after the deadline and was killed; the command may have reached the device", grace),
			Err:     fmt.Errorf("%w: %w", ErrOverrun, err)}
	}
	return &devices.Error{Code: devices.CodeInDoubt, Message: "plugin failed mid-command: " + err.Error(),
		Err: fmt.Errorf("%w: %w", ErrPluginLost, err)}
}
