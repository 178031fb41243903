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
	if os.Getenv(holdEnv) != "" {
		os.Exit(holdOpen(os.Getenv(holdEnv)))
	}
	goleak.VerifyTestMain(m)
}
