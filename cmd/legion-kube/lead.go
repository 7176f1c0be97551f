package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube"
	"github.com/legion-dev/legion/controller/lease"
)

// lead is `legion-kube lead [flags] -- COMMAND [ARG...]`: run COMMAND
// only while holding a Lease (package controller/lease), so that two
// replicas of a team's controller, or a pod and a user's machine, never
// decide at once. The command is a child of this process, killed with
// it (Pdeathsig). Losing the Lease sends it SIGTERM, and SIGKILL when it
// has not ended before the others may take the Lease
// (lease duration - renew deadline); the Lease is released only once it
// has ended. When the command ends by itself, the Lease is released and
// lead exits with its status.
func lead(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("legion-kube lead", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ns := fs.String("namespace", "", "the Lease's namespace (the team's)")
	name := fs.String("name", "", "the Lease's name (legion-controller-<team short id> for a team's controller)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig outside a pod ($KUBECONFIG, else ~/.kube/config, when empty)")
	kctx := fs.String("context", "", "the kubeconfig's context (its current one when empty)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if *ns == "" || *name == "" || len(argv) == 0 {
		fmt.Fprintln(stderr, "legion-kube lead: want --namespace NS --name NAME -- COMMAND [ARG...]")
		return 2
	}
	// In a pod with no kubeconfig: the pod's service account.
	cfg, err := kube.Config(api.KubeTarget{Kubeconfig: *kubeconfig, Context: *kctx, Namespace: *ns})
	if err != nil {
		fmt.Fprintln(stderr, "legion-kube lead:", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	o := lease.Options{Config: cfg, Namespace: *ns, Name: *name, Log: log}
	grace := lease.DefaultLeaseDuration - lease.DefaultRenewDeadline - time.Second
	status := 0
	err = lease.Run(ctx, o, func(ctx context.Context) error {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			status = 1
			return fmt.Errorf("start %s: %w", argv[0], err)
		}
		log.Info("leading: started the command", "pid", cmd.Process.Pid, "lease", *ns+"/"+*name)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			status = exitStatus(err)
			return err
		case <-ctx.Done():
		}
		log.Warn("no longer leading: stopping the command", "pid", cmd.Process.Pid)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			<-done
		}
		return ctx.Err()
	})
	if err != nil && status == 0 {
		fmt.Fprintln(stderr, "legion-kube lead:", err)
		return 1
	}
	return status
}

func exitStatus(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode()
	}
	return 1
}
