package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// common are the flags every broker-facing command takes.
type common struct {
	mqtt    mqtt.Config
	prefix  string
	holder  string
	json    bool
	timeout time.Duration
}

func addCommon(fs *flag.FlagSet) *common {
	c := &common{}
	fs.StringVar(&c.mqtt.Broker, "broker", "tcp://127.0.0.1:1883", "MQTT broker URL")
	fs.StringVar(&c.mqtt.Username, "username", "", "MQTT username")
	fs.StringVar(&c.mqtt.Password, "password", "", "MQTT password")
	fs.StringVar(&c.mqtt.TLS.CA, "ca", "", "PEM CA bundle that verifies the broker")
	fs.StringVar(&c.mqtt.TLS.Cert, "cert", "", "PEM client certificate")
	fs.StringVar(&c.mqtt.TLS.Key, "cert-key", "", "PEM key of the client certificate")
	fs.StringVar(&c.prefix, "prefix", protocol.DefaultPrefix, "protocol topic prefix")
	fs.StringVar(&c.holder, "holder", "fencectl", "holder name for leases")
	fs.BoolVar(&c.json, "json", false, "print JSON instead of text")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "give up waiting for an answer after this long")
	return c
}

// dial connects a supervisor client with the common flags.
func (c *common) dial(ctx context.Context) (*supervisor.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return supervisor.Dial(ctx, supervisor.Config{MQTT: c.mqtt, Prefix: c.prefix, Holder: c.holder})
}

// parse parses flags; it returns false (and the exit code) on -h or an error.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (bool, int) {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return false, exitOK
		}
		return false, exitError
	}
	return true, exitOK
}

// printJSON writes v as one line of JSON.
func printJSON(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintln(w, string(b))
}

// fail prints an error and returns exitError.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, "fencectl:", err)
	return exitError
}

// interspersed lets flags follow positional arguments ("send pump1 set --token T").
func interspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	return pos, nil
}
