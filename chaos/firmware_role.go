package chaos

import (
	"context"
	"os"

	"github.com/fencegate/fencegate/hwtest/simfirmware"
)

// runFirmware runs the reference firmware (hwtest/simfirmware) with args;
// its control lines come on stdin, as the harness writes them.
func runFirmware(ctx context.Context, args []string) error {
	return simfirmware.Run(ctx, args, os.Stdin, os.Stdout)
}
