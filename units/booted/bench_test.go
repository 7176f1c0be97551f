package booted_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/legion-dev/legion/internal/benchreport"
	"github.com/legion-dev/legion/units/booted"
	"github.com/legion-dev/legion/units/booted/bootedtest"
	"github.com/legion-dev/legion/units/sandbox"
	"github.com/legion-dev/legion/units/sdtest"
)

// BenchmarkBoot times a booted system's boot (until systemd inside says
// running), its reboot and its Stop, against the start of a bare private
// user manager (units/sandbox, the first test tier) in the same run; and a
// first login (the user's manager started by logind) against a command
// run as root inside.
func BenchmarkBoot(b *testing.B) {
	bootedtest.Require(b)
	const runs = 3
	ctx := context.Background()
	var boot, reboot, stop, bare, login, rootRun []time.Duration
	for i := 0; i < runs*b.N; i++ {
		start := time.Now()
		sb, err := sandbox.Start(ctx, sandbox.Options{Name: "legion-bench"})
		var missing *sandbox.MissingError
		if errors.As(err, &missing) {
			sdtest.Require(b, missing.What, false)
		}
		if err != nil {
			b.Fatal(err)
		}
		bare = append(bare, time.Since(start))
		if err := sb.Stop(ctx); err != nil {
			b.Fatal(err)
		}

		start = time.Now()
		s, err := booted.Boot(ctx, booted.Options{Name: "legion-bench-boot"})
		if err != nil {
			b.Fatal(err)
		}
		boot = append(boot, time.Since(start))
		if err := s.AddUser(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if _, err := s.Run(ctx, "true"); err != nil {
			b.Fatal(err)
		}
		rootRun = append(rootRun, time.Since(start))
		start = time.Now()
		if _, err := s.Login(ctx, "bench", "systemctl", "--user", "is-system-running", "--wait"); err != nil {
			b.Fatal(err)
		}
		login = append(login, time.Since(start))
		start = time.Now()
		if err := s.Reboot(ctx); err != nil {
			b.Fatal(err)
		}
		reboot = append(reboot, time.Since(start))
		start = time.Now()
		if err := s.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		stop = append(stop, time.Since(start))
	}
	benchreport.Vs(b, boot, "ms/boot", bare, "ms/bare-user-manager", "boot/bare-user-manager")
	benchreport.Vs(b, login, "ms/first-login", rootRun, "ms/run-as-root", "login/run")
	benchreport.MS(b, benchreport.Median(reboot), "ms/reboot")
	benchreport.MS(b, benchreport.Median(stop), "ms/stop")
}
