// Command fencectl is the command-line supervisor of fencegate: it makes
// keys, takes and manages leases, sends fenced commands, watches devices,
// decodes tokens, and runs the one-command demo.
//
//	fencectl demo
//	fencectl keygen --dir DIR
//	fencectl lease acquire|renew|release|get DOMAIN [flags]
//	fencectl send DEVICE OP [ARGS-JSON] (--token T | --domain D) [flags]
//	fencectl watch [DEVICE ...]
//	fencectl devices
//	fencectl token decode TOKEN [--pub FILE]
//	fencectl indoubt list | resolve DEVICE ID --applied|--not-applied
//	fencectl help [COMMAND] | --help | --version
//
// Exit codes: 0 success (applied, granted, …), 1 error (usage, connection),
// 2 rejected (stale token, held lease, bad request, …), 3 failed (device
// error or timeout), 4 in doubt, 5 no answer before the timeout.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK       = 0
	exitError    = 1
	exitRejected = 2
	exitFailed   = 3
	exitInDoubt  = 4
	exitNoAnswer = 5
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitError
	}
	cmds := map[string]func(context.Context, []string, io.Writer, io.Writer) int{
		"demo": runDemo, demoSupervisorCmd: runDemoSupervisor, "keygen": runKeygen, "lease": runLease,
		"send": runSend, "watch": runWatch, "devices": runDevices, "token": runToken,
		"indoubt": runInDoubt,
	}
	if code, done := topLevel(ctx, args, cmds, stdout, stderr); done {
		return code
	}
	f, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "fencectl: unknown command %q\n%s", args[0], usage)
		return exitError
	}
	return f(ctx, args[1:], stdout, stderr)
}

const usage = `usage: fencectl COMMAND [flags]

commands:
  demo                                   watch a stale holder being fenced (embedded broker, controller, agent)
  keygen --dir DIR                       write controller.key (0600) and controller.pub
  lease acquire|renew|release|get DOMAIN take, extend, give back or inspect a lease
  send DEVICE OP [ARGS-JSON]             send a fenced command (--token T, or --domain D to acquire)
  watch [DEVICE ...]                     print device state and results as they happen
  devices                                list every device the broker knows a state for
  token decode TOKEN [--pub FILE]        show a token's fields and check its signature
  indoubt list|resolve DEVICE ID         list in-doubt commands; resolve one --applied|--not-applied

  help [COMMAND]                         this text, or a command's syntax and flags
  version                                the version and VCS revision (also --version)

Run 'fencectl help COMMAND' or 'fencectl COMMAND -h' for a command's syntax
and flags. Exit codes: 0 ok, 1 error, 2 rejected, 3 failed, 4 in doubt,
5 no answer.
`
