package dashboard

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	sdactivation "github.com/coreos/go-systemd/v22/activation"

	"github.com/legion-dev/legion/internal/privdir"
	"github.com/legion-dev/legion/internal/unixsock"
)

// Listeners returns the sockets systemd passed (legion-web.socket: the TCP
// address and the unix socket), or, when the process was not
// socket-activated, a TCP listener on addr of its own (`legion web serve`
// run by hand). Unix listeners accept only connections from this user
// (SO_PEERCRED); others are closed at once. The LISTEN_* variables are
// unset so children never see them.
func Listeners(addr string, log *slog.Logger) ([]net.Listener, error) {
	if os.Getenv("LISTEN_FDS") == "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w (is the dashboard already running? legion-web.socket listens there once installed)", addr, err)
		}
		return []net.Listener{l}, nil
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
			switch l := l.(type) {
			case nil:
			case *net.UnixListener:
				ls = append(ls, &ownerListener{UnixListener: l, uid: uint32(os.Getuid()), log: log})
			default:
				ls = append(ls, l)
			}
		}
	}
	if len(ls) == 0 {
		return nil, errors.New("socket activation: LISTEN_FDS is set but no stream socket was passed")
	}
	return ls, nil
}

// ownerListener accepts unix connections only from processes of uid.
type ownerListener struct {
	*net.UnixListener
	uid uint32
	log *slog.Logger
}

func (l *ownerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		if _, err := unixsock.Peer(c, l.uid); err != nil {
			l.log.Warn("connection refused on the dashboard's unix socket", "err", err)
			c.Close()
			continue
		}
		return c, nil
	}
}

// LoginURL is the URL that logs a browser in: the token in the fragment,
// which browsers never send. listen is the dashboard's TCP address; an
// unspecified host (0.0.0.0, ::) is reached at the loopback address.
func LoginURL(listen, token string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("dashboard address %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(host, port), Path: "/login", Fragment: "t=" + token}
	return u.String(), nil
}

// LoginPage writes an HTML file (0600, in the 0700 directory dir) that
// sends a browser on to loginURL, and returns its path: a browser opened
// on the file gets the token without it appearing on any command line.
func LoginPage(dir, loginURL string) (string, error) {
	if err := privdir.Ensure(dir); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "web-login.html")
	page := fmt.Sprintf("<!doctype html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0; url=%s\"><title>Legion</title><a href=\"%s\">Open the Legion dashboard</a>\n", loginURL, loginURL)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return "", fmt.Errorf("write the login page: %w", err)
	}
	if _, err := f.WriteString(page); err != nil {
		f.Close()
		return "", fmt.Errorf("write the login page %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write the login page %s: %w", path, err)
	}
	return path, nil
}
