package activation

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"

	sdactivation "github.com/coreos/go-systemd/v22/activation"

	"github.com/legion-dev/legion/internal/unixsock"
)

// errHelperRunning is returned (wrapped) by listen when another helper
// already answers on the socket path.
var errHelperRunning = errors.New("another helper is already listening")

// activationListeners returns the listeners systemd passed (LISTEN_FDS);
// nil when the process was not socket-activated. The environment variables
// are unset so children never see them.
func activationListeners(log *slog.Logger) ([]net.Listener, error) {
	if os.Getenv("LISTEN_FDS") == "" {
		return nil, nil
	}
	byName, err := sdactivation.ListenersWithNames()
	if err != nil {
		return nil, fmt.Errorf("socket activation listeners: %w", err)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var ls []net.Listener
	for _, n := range names {
		for _, l := range byName[n] {
			if l == nil {
				continue
			}
			if _, ok := l.(*net.UnixListener); !ok {
				l.Close()
				return nil, fmt.Errorf("socket activation: listener %q is %s, want a unix stream socket (ListenStream= a path)", n, l.Addr().Network())
			}
			ls = append(ls, l)
		}
	}
	if len(ls) == 0 {
		return nil, fmt.Errorf("socket activation: LISTEN_FDS is set but no unix stream socket was passed")
	}
	log.Debug("socket-activated", "fd_names", names)
	return ls, nil
}

// listen creates the helper's own listener at path, for a helper started
// by hand, with unixsock.Listen: the directory is private (0700, ours),
// the socket 0600 and removed on close. A socket that still answers is
// never taken over (errHelperRunning); one that refuses connections is
// stale and replaced; any other file at path is left alone and reported.
func listen(path string) (*net.UnixListener, error) {
	l, err := unixsock.Listen(path)
	if errors.Is(err, unixsock.ErrInUse) {
		return nil, fmt.Errorf("listen on %s: %w (stop it, or use its socket)", path, errHelperRunning)
	}
	return l, err
}
