package kubetest

import (
	"net"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/units/sdtest"
)

// ServeGit serves the bare repositories under root over git's smart HTTP
// protocol (the real git http-backend, as a CGI), pushes allowed where a
// repository's http.receivepack says so, on l (nil: a port of
// 127.0.0.1; the node's address for the pod network), until the test
// ends. It returns the base URL: ROOT/NAME.git is BASE/NAME.git.
func ServeGit(t testing.TB, root string, l net.Listener) string {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		sdtest.Require(t, "git's http-backend (apt-get install git)", false)
	}
	srv := httptest.NewUnstartedServer(&cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	if l != nil {
		srv.Listener.Close()
		srv.Listener = l
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}
