package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fencegate/fencegate/internal/httpauth"
	"github.com/fencegate/fencegate/protocol"
)

// agentFlags are the flags of the commands that talk to an agent's HTTP API.
type agentFlags struct {
	url, tokenFile string
	json           bool
}

func (f *agentFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "agent", "http://127.0.0.1:9464", "the agent's HTTP API (its http.listen)")
	fs.StringVar(&f.tokenFile, "token-file", "", "file with the agent's bearer token (its http.token_file)")
	fs.BoolVar(&f.json, "json", false, "print JSON instead of text")
}

// inDoubtEntry is one entry of the agent's GET /v1/indoubt.
type inDoubtEntry struct {
	Device string          `json:"device"`
	ID     string          `json:"id"`
	Op     string          `json:"op"`
	Args   json.RawMessage `json:"args,omitempty"`
	Holder string          `json:"holder"`
	Fence  struct {
		Epoch uint64 `json:"epoch"`
		Seq   uint64 `json:"seq"`
	} `json:"fence"`
	AcceptedAt time.Time `json:"accepted_at"`
}

const indoubtUsage = `usage:
  fencectl indoubt list [--agent URL] [--json]
  fencectl indoubt resolve DEVICE ID --applied|--not-applied [--by NAME] [--agent URL] [--token-file F]

An in-doubt command was accepted by the agent, but whether it reached the
device is unknown (the agent stopped mid-apply, or the driver lost the
device). Check the machine, then resolve it: a retry of that id is answered
with the resolution from then on (applied/ok, or failed/device_error).
`

func runInDoubt(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, indoubtUsage)
		return exitError
	}
	switch args[0] {
	case "list":
		return runInDoubtList(ctx, args[1:], stdout, stderr)
	case "resolve":
		return runInDoubtResolve(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, indoubtUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "fencectl indoubt: unknown subcommand %q\n%s", args[0], indoubtUsage)
	return exitError
}

func runInDoubtList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("indoubt list", flag.ContinueOnError)
	var af agentFlags
	af.register(fs)
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return fail(stderr, fmt.Errorf("indoubt list takes no arguments, got %q", fs.Args()))
	}
	var list []inDoubtEntry
	if err := af.do(ctx, "GET", "/v1/indoubt", nil, &list); err != nil {
		return fail(stderr, err)
	}
	if af.json {
		for _, e := range list {
			printJSON(stdout, e)
		}
		return exitOK
	}
	printInDoubt(stdout, list)
	return exitOK
}

func printInDoubt(w io.Writer, list []inDoubtEntry) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no open in-doubt commands")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tID\tOP\tARGS\tHOLDER\tTOKEN\tACCEPTED AT")
	for _, e := range list {
		fmt.Fprintf(tw, "%s\t%q\t%s\t%s\t%s\t%d.%d\t%s\n", e.Device, e.ID, e.Op, orDash(string(e.Args)), e.Holder,
			e.Fence.Epoch, e.Fence.Seq, e.AcceptedAt.UTC().Format(time.RFC3339))
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runInDoubtResolve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("indoubt resolve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var af agentFlags
	af.register(fs)
	applied := fs.Bool("applied", false, "the command took effect on the device")
	notApplied := fs.Bool("not-applied", false, "the command did not take effect on the device")
	by := fs.String("by", defaultResolver(), "who checked the device (journaled with the resolution)")
	pos, err := interspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitError
	}
	if len(pos) != 2 {
		return fail(stderr, fmt.Errorf("usage: fencectl indoubt resolve DEVICE ID --applied|--not-applied"))
	}
	if *applied == *notApplied {
		return fail(stderr, errors.New("indoubt resolve: give exactly one of --applied and --not-applied"))
	}
	res := map[string]string{"resolution": "not_applied", "by": *by}
	if *applied {
		res["resolution"] = "applied"
	}
	var r protocol.Result
	path := "/v1/indoubt/" + pathSegment(pos[0]) + "/" + pathSegment(pos[1]) + "/resolve"
	if err := af.do(ctx, "POST", path, res, &r); err != nil {
		return fail(stderr, err)
	}
	if af.json {
		printJSON(stdout, r)
		return exitOK
	}
	fmt.Fprintf(stdout, "%s/%s resolved %s; a retry of it is now answered %s/%s: %s\n", pos[0], pos[1], res["resolution"], r.Status, r.Code, r.Message)
	return exitOK
}

// defaultResolver is "user@host" of whoever runs fencectl.
func defaultResolver() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return strings.Trim(name+"@"+host, "@")
}

// do sends one request to the agent's HTTP API and decodes its JSON answer
// into out; an error answer becomes an error carrying the agent's message.
func (f *agentFlags) do(ctx context.Context, method, path string, body, out any) error {
	req, err := f.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("agent %s: %w", f.url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("agent %s: %w", f.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		return fmt.Errorf("agent answered %s: %s", resp.Status, e.Error)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("agent %s: answer: %w", f.url, err)
	}
	return nil
}

func (f *agentFlags) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(f.url, "/")+path, rd)
	if err != nil {
		return nil, fmt.Errorf("--agent: %w", err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json") // the agent refuses a body not declared JSON (a web page's forgery)
	}
	if f.tokenFile != "" {
		tok, err := httpauth.ClientToken(f.tokenFile) // "name:token" or a bare token, as the agent reads it
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return req, nil
}

// pathSegment escapes s as one URL path segment. "." and ".." are escaped
// too (url.PathEscape leaves dots alone, and the agent's router would clean
// them away): a command id may be any 1..128 bytes.
func pathSegment(s string) string {
	if s == "." || s == ".." {
		return strings.ReplaceAll(s, ".", "%2E")
	}
	return url.PathEscape(s)
}
