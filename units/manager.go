package units

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// ErrNoManager means no systemd user manager could be reached. Connect
// returns it as a *NoManagerError, whose message lists what was tried and
// says what to do.
var ErrNoManager = errors.New("no systemd user manager reachable")

// Attempt is one way Connect tried to reach the user manager.
type Attempt struct {
	Via string // "private socket /run/user/1000/systemd/private", "session bus unix:path=..."
	Err error
}

// NoManagerError is the error Connect returns when it reached no user
// manager; errors.Is(err, ErrNoManager) is true for it.
type NoManagerError struct {
	Attempts []Attempt
}

func (e *NoManagerError) Error() string {
	var b strings.Builder
	b.WriteString("no systemd user manager reachable (tried ")
	for i, a := range e.Attempts {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %v", a.Via, a.Err)
	}
	b.WriteString("): log in through a systemd session, or run `loginctl enable-linger $USER`," +
		" or set XDG_RUNTIME_DIR (and DBUS_SESSION_BUS_ADDRESS) to those of a running user manager")
	return b.String()
}

// Is makes errors.Is(err, ErrNoManager) true.
func (e *NoManagerError) Is(target error) bool { return target == ErrNoManager }

// Unwrap returns the errors of the attempts.
func (e *NoManagerError) Unwrap() []error {
	errs := make([]error, len(e.Attempts))
	for i, a := range e.Attempts {
		errs[i] = a.Err
	}
	return errs
}

// Errors callers branch on. The D-Bus error systemd sent is in the message.
var (
	// ErrNoSuchUnit: the unit is not loaded (never started, or stopped and
	// garbage-collected).
	ErrNoSuchUnit = errors.New("unit not loaded")
	// ErrUnitExists: StartTransient found the name still loaded, and not
	// failed (running, or stopping); stop it first.
	ErrUnitExists = errors.New("unit already loaded")
	// ErrJobTimeout: a start or stop job gave no result within the
	// context's deadline, or DefaultJobTimeout when the context has none.
	ErrJobTimeout = errors.New("no job result in time")
	// errClosed: the Manager was closed.
	errClosed = errors.New("systemd manager client closed")
)

// DefaultJobTimeout bounds the wait for a job's result when the context
// has no deadline.
const DefaultJobTimeout = 30 * time.Second

// reconnectTimeout bounds how long a call waits for the manager to come back
// after it dropped the connection (daemon-reexec takes a moment).
const reconnectTimeout = 10 * time.Second

// D-Bus names of systemd's manager API.
const (
	sdDest           = "org.freedesktop.systemd1"
	sdPath           = godbus.ObjectPath("/org/freedesktop/systemd1")
	sdManagerIface   = "org.freedesktop.systemd1.Manager"
	sdUnitIface      = "org.freedesktop.systemd1.Unit"
	sdServiceIface   = "org.freedesktop.systemd1.Service"
	dbusPropsIface   = "org.freedesktop.DBus.Properties"
	errNameNoSuch    = "org.freedesktop.systemd1.NoSuchUnit"
	errNameExists    = "org.freedesktop.systemd1.UnitExists"
	propertiesSignal = dbusPropsIface + ".PropertiesChanged"
)

// Manager is a client of the systemd user manager. Its methods are safe for
// concurrent use. When the manager drops the connection (daemon-reexec, a
// restarted bus) the next call reconnects once and retries; a start that
// was in flight then may report ErrUnitExists.
type Manager struct {
	tr transport

	mu     sync.Mutex
	conn   *conns // nil after Close
	closed bool
}

// conns is one connection to the manager, seen two ways: go-systemd's
// client (calls and job results) and the raw godbus connection, for calls
// go-systemd lacks and for Changes. One connection, not go-systemd's pair
// nor one more for Changes: on the private socket systemd sends every
// signal of every unit to every connection, unconditionally, and each
// connection decodes each signal in full. Three connections cost the
// helper three decodes of every unit change on the machine, the units of
// other programs too, and systemd three sends.
type conns struct {
	sd  *sddbus.Conn
	raw *godbus.Conn
}

// transport is one way to reach the manager.
type transport struct {
	via   string // for messages
	addr  string // D-Bus address
	hello bool   // a message bus (needs Hello, signals need Subscribe) rather than the private socket
}

// Connect reaches the user manager: its private socket
// $XDG_RUNTIME_DIR/systemd/private first (no bus needed), then the session
// bus ($DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus). Without
// XDG_RUNTIME_DIR it uses /run/user/<uid>. It never launches a bus. ctx
// bounds connecting, not the connection's life: call Close when done.
// When nothing answers it returns a *NoManagerError (errors.Is ErrNoManager).
func Connect(ctx context.Context) (*Manager, error) {
	runtimeDir := os.Getenv("XDG_RUNTIME_DIR")
	if runtimeDir == "" {
		runtimeDir = "/run/user/" + strconv.Itoa(os.Getuid())
	}
	private := filepath.Join(runtimeDir, "systemd", "private")
	trs := []transport{{via: "private socket " + private, addr: "unix:path=" + private}}
	bus := os.Getenv("DBUS_SESSION_BUS_ADDRESS")
	if bus == "" {
		bus = "unix:path=" + filepath.Join(runtimeDir, "bus")
	}
	trs = append(trs, transport{via: "session bus " + bus, addr: bus, hello: true})

	var attempts []Attempt
	for _, tr := range trs {
		c, err := tr.connect(ctx)
		if err == nil {
			return &Manager{tr: tr, conn: c}, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect to systemd user manager: %w", ctx.Err())
		}
		attempts = append(attempts, Attempt{Via: tr.via, Err: err})
	}
	return nil, &NoManagerError{Attempts: attempts}
}

// dial opens and authenticates one D-Bus connection. ctx bounds the dial
// only: the connection lives until closed.
func (tr transport) dial(ctx context.Context) (*godbus.Conn, error) {
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel) // ctx ending mid-dial closes the connection, unblocking Auth
	conn, err := tr.dialLife(life)
	if !stop() {
		if conn != nil {
			conn.Close()
		}
		return nil, ctx.Err()
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return conn, nil // life is cancelled by nothing; conn.Close ends it
}

// dialLife dials a connection that closes when life ends.
func (tr transport) dialLife(life context.Context) (*godbus.Conn, error) {
	conn, err := godbus.Dial(tr.addr, godbus.WithContext(life))
	if err != nil {
		return nil, err
	}
	if err := conn.Auth([]godbus.Auth{godbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	if tr.hello {
		if err := conn.Hello(); err != nil {
			conn.Close()
			return nil, fmt.Errorf("hello: %w", err)
		}
	}
	return conn, nil
}

// connect makes the connection and checks that a manager answers (a bus
// accepts connections with no manager on it).
func (tr transport) connect(ctx context.Context) (*conns, error) {
	conn, err := tr.dial(ctx)
	if err != nil {
		return nil, err
	}
	// go-systemd dials twice, for calls and for job signals; both are
	// this connection (see conns). Its Close closes it twice, which
	// godbus allows.
	sd, err := sddbus.NewConnection(func() (*godbus.Conn, error) { return conn, nil })
	if err != nil {
		conn.Close()
		return nil, err
	}
	if _, err := sd.SystemStateContext(ctx); err != nil {
		sd.Close()
		return nil, err
	}
	return &conns{sd: sd, raw: conn}, nil
}

// Close closes the connection; the channels of Changes close with it.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn != nil {
		m.conn.sd.Close()
		m.conn = nil
	}
	m.closed = true
	return nil
}

func (m *Manager) current() (*conns, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errClosed
	}
	return m.conn, nil
}

// do runs op on the connection. If op fails because the manager dropped the
// connection, do reconnects and runs op once more.
func (m *Manager) do(ctx context.Context, op func(c *conns) error) error {
	c, err := m.current()
	if err != nil {
		return err
	}
	err = op(c)
	if err == nil || !connLost(c, err) {
		return err
	}
	c, rerr := m.reconnect(ctx, c)
	if rerr != nil {
		return fmt.Errorf("%w (reconnect: %w)", err, rerr)
	}
	return op(c)
}

// connLost reports whether err means the connection is gone. A write to a
// socket the manager closed fails (EPIPE) before godbus notices the
// closed connection.
func connLost(c *conns, err error) bool {
	return !c.sd.Connected() || errors.Is(err, godbus.ErrClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// reconnect replaces the lost connection old, unless another call already
// did, polling until the manager answers again or reconnectTimeout passes.
func (m *Manager) reconnect(ctx context.Context, old *conns) (*conns, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errClosed
	}
	if m.conn != old {
		return m.conn, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reconnectTimeout)
	defer cancel()
	for {
		c, err := m.tr.connect(ctx)
		if err == nil {
			old.sd.Close()
			m.conn = c
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reconnect via %s: %w", m.tr.via, err)
		case <-time.After(100 * time.Millisecond): // poll interval while the manager restarts
		}
	}
}

// dbusErrorName is the D-Bus error name in err, or "".
func dbusErrorName(err error) string {
	var e godbus.Error
	if errors.As(err, &e) {
		return e.Name
	}
	var p *godbus.Error
	if errors.As(err, &p) {
		return p.Name
	}
	return ""
}

// unitError wraps an error of operation op on unit name, mapping systemd's
// errors that callers branch on to this package's.
func unitError(op, name string, err error) error {
	switch dbusErrorName(err) {
	case errNameNoSuch:
		return fmt.Errorf("%s unit %s: %w", op, name, ErrNoSuchUnit)
	case errNameExists:
		return fmt.Errorf("%s unit %s: %w", op, name, ErrUnitExists)
	}
	return fmt.Errorf("%s unit %s: %w", op, name, err)
}
