package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legion-dev/legion/internal/waitfor"
)

const journald = "/lib/systemd/systemd-journald"

// envHelper makes the test binary, run by TestJournald as another user,
// do one thing and exit (see TestMain).
const envHelper = "LEGION_JOURNAL_HELPER"

// TestMain runs the helper roles TestJournald gives its own binary: "check"
// prints Check's error (or ok), "log" logs one entry with the team and
// message in its arguments, "read" prints the messages of the team's
// entries as Read returns them.
func TestMain(m *testing.M) {
	switch os.Getenv(envHelper) {
	case "":
		os.Exit(m.Run())
	case "check":
		fmt.Println(errString(Check()))
	case "log":
		NewLogger(IdentLegion, slog.LevelInfo).Info(os.Getenv("MSG"), "team", os.Getenv("TEAM"))
	case "read":
		err := Read(context.Background(), Query{Team: os.Getenv("TEAM"), UID: os.Getuid()}, func(e Entry) error {
			fmt.Println(e.Message)
			return nil
		})
		if err != nil {
			fmt.Println("error:", err)
		}
	}
	os.Exit(0)
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	var kinds []string
	for _, k := range []error{ErrNoJournald, ErrVolatile, ErrPermission} {
		if errors.Is(err, k) {
			kinds = append(kinds, k.Error())
		}
	}
	return strings.Join(kinds, "+") + ": " + err.Error()
}

// TestJournald runs the real systemd-journald, in a private mount namespace
// (tmpfs on /run and /var/log: see inNamespace), and checks against it
// what a user sees: Check's answer before journald runs, with a volatile
// and with a persistent journal, for root and for an ordinary user; the
// logger's entries as Read returns them, in order, for a team and for an
// issue; Read following new entries.
func TestJournald(t *testing.T) {
	_, err := os.Stat(journald)
	if !inNamespace(t, "TestJournald", `[ -x `+journald+` ] && mount -t tmpfs -o mode=0755 legion-test /var/log`) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	// The test binary, where another user can run it.
	bin := "/run/legion-test/journal.test"
	copyFile(t, os.Args[0], bin)
	asUser := func(uid int, role string, env ...string) string {
		t.Helper()
		cmd := exec.Command("setpriv", fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", uid), "--clear-groups", bin)
		cmd.Env = append(os.Environ(), append(env, envHelper+"="+role)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s as uid %d: %v\n%s", role, uid, err, out)
		}
		return strings.TrimSpace(string(out))
	}

	if err := Check(); !errors.Is(err, ErrNoJournald) {
		t.Errorf("Check() with no journald = %v; want ErrNoJournald", err)
	}

	jd := exec.Command(journald)
	jd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := jd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		jd.Process.Kill()
		jd.Wait()
	}()
	mid, err := os.ReadFile(systemLayout.machineID)
	if err != nil {
		t.Fatal(err)
	}
	runtime := filepath.Join(systemLayout.runDir, strings.TrimSpace(string(mid)), "system.journal")
	waitfor.Check(t, 30*time.Second, "journald's socket and volatile journal", func() error {
		if _, err := os.Stat(journalSocket); err != nil {
			return err
		}
		_, err := os.Stat(runtime)
		return err
	})
	// As at boot, systemd-tmpfiles gives /run/log/journal its group and
	// ACLs (the systemd-journal and adm groups read it).
	run(t, "systemd-tmpfiles", "--create", "--prefix", "/run/log/journal", "--prefix", "/var/log/journal")

	// Volatile: root reads the system journal; another user does not.
	if err := Check(); !errors.Is(err, ErrVolatile) || errors.Is(err, ErrPermission) {
		t.Errorf("Check() as root, volatile journal = %v; want ErrVolatile alone", err)
	}
	if got := asUser(1000, "check"); !strings.HasPrefix(got, "the journal is volatile+insufficient permissions: ") {
		t.Errorf("Check() as uid 1000, volatile journal = %s; want ErrVolatile and ErrPermission", got)
	}

	log := NewLogger(IdentLegion, slog.LevelInfo).With("team", "web")
	log.Info("applied", "issue", "WEB-1", "mode", "plan")
	log.Info("tick")
	log.Info("spawn", "issue", "WEB-1", "unit", "legion-0a1b2c3d-web-1-plan.service")
	NewLogger(IdentLegion, slog.LevelInfo).Info("another team's", "team", "api", "issue", "WEB-1")
	ctx := t.Context()
	readAll := func(q Query) []string {
		var got []string
		err := read(ctx, q, func(e Entry) error {
			got = append(got, e.Message)
			return nil
		})
		if err != nil {
			t.Fatalf("read %+v: %v", q, err)
		}
		return got
	}
	want := "applied team=web issue=WEB-1 mode=plan|spawn team=web issue=WEB-1 unit=legion-0a1b2c3d-web-1-plan.service"
	waitfor.Check(t, 30*time.Second, "the issue's entries", func() error {
		if got := strings.Join(readAll(Query{Team: "web", Issue: "WEB-1"}), "|"); got != want {
			return fmt.Errorf("read: %s; want %s", got, want)
		}
		return nil
	})
	if got, want := strings.Join(readAll(Query{Team: "web"}), "|"), "applied team=web issue=WEB-1 mode=plan|tick team=web|spawn team=web issue=WEB-1 unit=legion-0a1b2c3d-web-1-plan.service"; got != want {
		t.Errorf("read team web: %s; want %s", got, want)
	}

	// Persistent, as README.Debian of systemd says, and a flush.
	run(t, "mkdir", "-p", "/var/log/journal")
	run(t, "systemd-tmpfiles", "--create", "--prefix", "/var/log/journal")
	run(t, "journalctl", "--flush")
	if err := Check(); err != nil {
		t.Errorf("Check() as root, persistent journal = %v; want nil", err)
	}
	// An ordinary user reads their own lines, and only theirs.
	asUser(1000, "log", "TEAM=web", "MSG=from uid 1000")
	// journald makes the user's file with the first entry, then gives the
	// user its read ACL.
	waitfor.Check(t, 30*time.Second, "uid 1000 to read their own journal", func() error {
		if got := asUser(1000, "check"); got != "ok" {
			return fmt.Errorf("Check() as uid 1000, persistent journal = %s; want ok", got)
		}
		return nil
	})
	waitfor.Check(t, 30*time.Second, "uid 1000's own entry", func() error {
		if got := asUser(1000, "read", "TEAM=web"); got != "from uid 1000 team=web" {
			return fmt.Errorf("Read as uid 1000: %q; want its own entry only", got)
		}
		return nil
	})

	// A user with nothing in the journal yet reads nothing (journalctl
	// alone would fail: no file of theirs, the system's unreadable).
	if got := asUser(1001, "read", "TEAM=web"); got != "" {
		t.Errorf("Read as uid 1001, who logged nothing: %q; want nothing", got)
	}

	// Following: the entries so far, then a new one.
	fctx, cancel := context.WithCancel(ctx)
	seen := make(chan string, 16)
	done := make(chan error, 1)
	go func() {
		done <- read(fctx, Query{Team: "web", Issue: "WEB-2", Follow: true}, func(e Entry) error {
			seen <- e.Message
			return nil
		})
	}()
	log.Info("dispatched", "issue", "WEB-2")
	select {
	case m := <-seen:
		if m != "dispatched team=web issue=WEB-2" {
			t.Errorf("followed entry %q; want the one just logged", m)
		}
	case err := <-done:
		t.Fatalf("read -f ended before the new entry: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("read -f: no new entry within a minute")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("read -f after its context ended: %v; want nil", err)
	}
}

func run(t *testing.T, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
