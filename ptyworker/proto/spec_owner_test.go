package proto

import (
	"os"
	"testing"
)

func TestSpecOwner(t *testing.T) {
	for _, tt := range []struct {
		uid  int
		perm uint32
		ok   bool
	}{
		{1000, 0o600, true},
		{1000, 0o400, true},
		{1000, 0o640, false}, // the worker's own file: no one else reads it
		{0, 0o440, true},     // a Secret volume: root-owned, the pod's group reads it
		{0, 0o444, false},
		{0, 0o600, true},
		{1001, 0o600, false}, // another user could have planted it
	} {
		err := specOwner(tt.uid, os.FileMode(tt.perm), 1000)
		if (err == nil) != tt.ok {
			t.Errorf("specOwner(uid %d, %#o) = %v; want ok=%v", tt.uid, tt.perm, err, tt.ok)
		}
	}
}
