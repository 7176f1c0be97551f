package activation

import (
	"testing"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/ptyworker"
)

// TestRingSizeBounds: every worker.ring_size the configuration accepts is
// one a spawn spec accepts, so a valid legion.toml never makes spawns fail.
func TestRingSizeBounds(t *testing.T) {
	if config.MinRingSize != ptyworker.MinRingSize || config.MaxRingSize != ptyworker.MaxRingSize {
		t.Fatalf("worker.ring_size accepts %d..%d bytes, a spawn spec %d..%d",
			config.MinRingSize, config.MaxRingSize, ptyworker.MinRingSize, ptyworker.MaxRingSize)
	}
}
