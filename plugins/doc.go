// Package plugins runs device drivers as separate processes with
// hashicorp/go-plugin over gRPC, so third parties can add drivers without
// forking the agent, and a crashing driver cannot take the agent down.
//
// It is the one shared package of the driver plugin kind:
//
//   - the handshake (magic cookie, protocol version) and the versioned plugin
//     sets both sides use (handshake.go);
//   - the gRPC service Describe / Apply / Health (internal/driverpb) with its
//     client and server adapters (grpc.go), every call carrying the caller's
//     ctx and deadline;
//   - the host side, registered as driver "plugin": Host starts the plugin
//     binary named in the device's settings, checks its checksum, forwards
//     its stderr to the agent's log, pings it and restarts it with backoff
//     after a crash (host.go, supervise.go);
//   - the plugin side, a small SDK: Serve(driver) in a plugin's main, with
//     DecodeConfig, Device and Logger (serve.go), and ServeTest for
//     in-process tests (go-plugin's reattach mode).
//
// The rule both sides keep: once the host has answered a command, that
// command can no longer reach the device, and a command that may have
// reached it is answered in_doubt, never failed. So the host sends one
// command at a time and nothing while one is in the plugin; a plugin that
// does not answer within Config.OverrunGrace after the command's deadline
// is killed (SIGKILL, waited for) and restarted, and the command answered
// in_doubt; the plugin side (Serve) starts no command whose deadline has
// passed and queues none behind a running one. Outputs over
// devices.MaxOutputBytes are dropped (device_error) on both sides.
//
// A crash while a command is in the plugin answers that command in_doubt (it
// may have acted), marks the device unavailable until the plugin is back,
// and answers commands in between device_unavailable. A plugin does not
// outlive its agent: on Linux the host starts it with Pdeathsig SIGKILL
// from a thread locked for the Host's life (spawn.go), and Serve exits when
// its parent process goes (parentwatch.go).
package plugins
