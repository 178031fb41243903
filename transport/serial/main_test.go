package serial

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) != "" {
		os.Exit(probeOpen(os.Getenv(probeEnv)))
	}
	goleak.VerifyTestMain(m)
}
