package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/plugins/internal/driverpb"
)

// driverPlugin is the go-plugin glue of the driver kind: on the plugin side
// it registers impl's gRPC server, on the host side it makes a grpcClient.
type driverPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl devices.Driver // plugin side only
}

var _ plugin.GRPCPlugin = (*driverPlugin)(nil)

// GRPCServer registers the driver service for p.impl.
func (p *driverPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	driverpb.RegisterDriverServer(s, newGRPCServer(p.impl))
	return nil
}

// GRPCClient returns a *grpcClient over conn.
func (p *driverPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &grpcClient{rpc: driverpb.NewDriverClient(conn)}, nil
}

// grpcServer serves one devices.Driver. It keeps the Driver contract for
// the plugin author: Apply is never called concurrently, even when the host
// gave up on a command (deadline) that the driver is still running — the
// next Apply waits for it, or for its own deadline.
type grpcServer struct {
	driverpb.UnimplementedDriverServer
	impl  devices.Driver
	slot  chan struct{} // one token: held while impl.Apply runs
	avail availability
}

func newGRPCServer(impl devices.Driver) *grpcServer {
	s := &grpcServer{impl: impl, slot: make(chan struct{}, 1)}
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

// Apply runs one command through impl with the host's ctx (and deadline).
// A driver failure is a Failure in the response, not a gRPC error.
func (s *grpcServer) Apply(ctx context.Context, req *driverpb.ApplyRequest) (*driverpb.ApplyResponse, error) {
	select {
	case s.slot <- struct{}{}:
	case <-ctx.Done():
		return &driverpb.ApplyResponse{Failure: failureToPB(devices.Errorf(devices.CodeDeviceTimeout,
			"deadline passed while an earlier command was still running in the plugin"))}, nil
	}
	defer func() { <-s.slot }()
	out, err := s.impl.Apply(ctx, commandFromPB(req))
	if err != nil {
		return &driverpb.ApplyResponse{Failure: failureToPB(err)}, nil
	}
	return &driverpb.ApplyResponse{Output: out}, nil
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

// grpcClient is the host's view of one running plugin. It implements
// devices.Driver for a single plugin process, without restarts (Host adds
// those). Apply may be called concurrently; Describe returns what describe
// fetched.
type grpcClient struct {
	rpc  driverpb.DriverClient
	caps devices.Capabilities // set by describe, before first use
}

var _ devices.Driver = (*grpcClient)(nil)

// describe fetches and keeps the plugin's capabilities.
func (c *grpcClient) describe(ctx context.Context) error {
	resp, err := c.rpc.Describe(ctx, &driverpb.DescribeRequest{})
	if err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	c.caps = capsFromPB(resp)
	return nil
}

// Apply sends cmd to the plugin with ctx's deadline. A failure of the
// device comes back as its *devices.Error; a failure of the call is
// device_timeout if ctx is done, else in_doubt wrapping ErrPluginLost.
func (c *grpcClient) Apply(ctx context.Context, cmd devices.Command) (json.RawMessage, error) {
	resp, err := c.rpc.Apply(ctx, commandToPB(cmd))
	if err != nil {
		return nil, callError(ctx, err)
	}
	if f := resp.GetFailure(); f != nil {
		return nil, failureFromPB(f)
	}
	if len(resp.Output) == 0 {
		return nil, nil
	}
	return resp.Output, nil
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

// Close does nothing: the go-plugin client owns the connection.
func (c *grpcClient) Close() error { return nil }

// callError maps a failed call: the caller's deadline (seen by either side)
// is device_timeout, anything else means the plugin failed.
func callError(ctx context.Context, err error) error {
	if ctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded {
		return &devices.Error{Code: devices.CodeDeviceTimeout, Message: "plugin did not answer before the deadline",
			Err: context.Cause(ctx)}
	}
	return &devices.Error{Code: devices.CodeInDoubt, Message: "plugin failed mid-command: " + err.Error(),
		Err: fmt.Errorf("%w: %w", ErrPluginLost, err)}
}
