package tunnel

import (
	"testing"
	"time"
)

// A path whose one-way delay exceeds the timer tick must not rekey in a loop: right
// after a rekey nothing has been received under the new keys yet, and that is not
// "the receive counter reached its limit".
func TestEngineNoRekeyLoopOnSlowPaths(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.setDelays(30*time.Millisecond, 30*time.Millisecond)
	waitUsable(t, r.cliA, "server", 2)
	idx := r.cliA.Status().Peers[0].SessionIndex
	time.Sleep(600 * time.Millisecond)
	if now := r.cliA.Status().Peers[0].SessionIndex; now != idx {
		t.Fatalf("session index changed from %#x to %#x without a reason to rekey", idx, now)
	}
}
