package frame

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fencegate/fencegate/transport/serial"
)

// holds: TestAttackDoubleGuardNeverCompletes tries to break I2 through the
// cut-frame guard: a send whose port took only the guard byte leaves d.cut
// at the older cut frame, so the wire can carry a prefix of that frame, the
// guard, the same guard again and then the next frame. For many payloads
// (random args, args sized so the frame crosses COBS block boundaries) and
// every prefix length, neither "prefix+guard+guard+next" nor
// "prefix+guard+next" decodes to the cut request. It held.
func TestAttackDoubleGuardNeverCompletes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	next, err := request(cmd("next", "set", `{"value":2}`, 9))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 120 {
		args := fmt.Sprintf(`{"value":%d,"pad":"%s"}`, rng.Uint64(), randomText(rng, i))
		c := cmd(fmt.Sprintf("cut-%d", i), "set", args, uint64(3+i))
		cut, err := request(c)
		if err != nil {
			continue // too large for a frame: never sent
		}
		g := serial.CutGuard(cut)
		checkCuts(t, cut, append([]byte{g, g}, next...), c.ID)
		checkCuts(t, cut, append([]byte{g}, next...), c.ID)
	}
}

// randomText is n bytes of printable text, at most 900 so that the frame
// crosses COBS's 254-byte block boundaries for some n.
func randomText(rng *rand.Rand, n int) string {
	b := make([]byte, n*3%900)
	for i := range b {
		b[i] = byte('a' + rng.IntN(26))
	}
	return string(b)
}
