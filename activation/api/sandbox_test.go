package api

import (
	"strings"
	"testing"
)

func TestSandboxCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		sb   Sandbox
		want string
	}{
		{"relative", Sandbox{Write: []string{"work"}}, "not a clean absolute path"},
		{"unclean", Sandbox{Read: []string{"/a/../b"}}, "not a clean absolute path"},
		{"hidden below writable", Sandbox{Write: []string{"/h"}, Hide: []string{"/h/.ssh"}}, "below the writable"},
		{"make dir not writable", Sandbox{MakeDirs: []string{"/c"}}, "not in write"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.sb.Check()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Check(%+v) = %v; want an error with %q", c.sb, err, c.want)
			}
		})
	}
}
