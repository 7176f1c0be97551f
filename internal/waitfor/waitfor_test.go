package waitfor

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	t.Run("holds after some tries", func(t *testing.T) {
		tries := 0
		err := Until(time.Minute, "the third try", func() error {
			tries++
			if tries < 3 {
				return errors.New("not yet")
			}
			return nil
		})
		if err != nil || tries != 3 {
			t.Errorf("Until = %v after %d tries; want nil after 3", err, tries)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		dead := errors.New("etcd exited")
		tries := 0
		err := Until(time.Hour, "etcd", func() error { tries++; return Stop(dead) })
		if !errors.Is(err, dead) || !strings.Contains(err.Error(), "waiting for etcd: etcd exited") {
			t.Errorf("Until = %v; want at once an error naming what was awaited and wrapping %v", err, dead)
		}
		if tries != 1 {
			t.Errorf("cond called %d times after it said Stop; want 1", tries)
		}
	})
	t.Run("never holds", func(t *testing.T) {
		last := errors.New("saw 42")
		tries := 0
		err := Until(0, "the answer", func() error { tries++; return last })
		if !errors.Is(err, last) || !strings.Contains(err.Error(), "waiting for the answer") {
			t.Errorf("Until = %v; want an error naming what was awaited and wrapping %v", err, last)
		}
		if tries != 1 {
			t.Errorf("cond called %d times with a zero timeout; want 1", tries)
		}
	})
}
