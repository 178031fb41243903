package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/fencegate/fencegate/internal/buildinfo"
)

// synopses are the sub-commands' positional syntax, the first line of
// their -h. A command missing here shows "fencectl NAME [flags]".
var synopses = map[string]string{
	"demo":    "fencectl demo [--ttl D] [--pause D] [--devices LIST] [--keep DIR]",
	"keygen":  "fencectl keygen [--dir DIR] [--force]",
	"lease":   "fencectl lease acquire|renew|release|get DOMAIN [flags]\n       (renew and release: --token T)",
	"send":    "fencectl send DEVICE OP [ARGS-JSON] (--token T | --domain D) [flags]",
	"watch":   "fencectl watch [DEVICE ...] [flags]",
	"devices": "fencectl devices [flags]",
	"token":   "fencectl token decode TOKEN [--pub FILE] [--json]",
	"indoubt": "fencectl indoubt list | resolve DEVICE ID --applied|--not-applied [flags]",
}

// newFlagSet is a sub-command's flag set: errors and -h go to stderr, and
// -h shows the command's synopsis above its flags.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		syn, ok := synopses[name]
		if !ok {
			syn = "fencectl " + name + " [flags]"
		}
		fmt.Fprintf(fs.Output(), "usage: %s\n\nflags:\n", syn)
		fs.PrintDefaults()
	}
	return fs
}

// flagExit is the exit code of a failed flag parse: 0 for -h/--help (the
// usage was asked for and printed), 1 otherwise.
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitError
}

// topLevel answers the commands that are not sub-commands: --help, -h,
// help [CMD], --version and version. It reports false for anything else.
func topLevel(ctx context.Context, args []string, cmds map[string]func(context.Context, []string, io.Writer, io.Writer) int,
	stdout, stderr io.Writer) (int, bool) {
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK, true
	case "-version", "--version", "version":
		buildinfo.Fprint(stdout, "fencectl")
		return exitOK, true
	case "help":
		return help(ctx, args[1:], cmds, stdout, stderr), true
	}
	return 0, false
}

// help prints the usage, or with a command name that command's -h, to stdout.
func help(ctx context.Context, args []string, cmds map[string]func(context.Context, []string, io.Writer, io.Writer) int,
	stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	f, ok := cmds[args[0]]
	if !ok || args[0] == demoSupervisorCmd {
		fmt.Fprintf(stderr, "fencectl: help: unknown command %q\n%s", args[0], usage)
		return exitError
	}
	return f(ctx, []string{"-h"}, stdout, stdout)
}
