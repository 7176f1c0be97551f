// Command legion-kube is Legion's Kubernetes engine: the program that
// talks to a team's cluster for the helper (`legion-kube engine`, started
// by the helper on the first session of a team with engine =
// "kubernetes") and for `legion doctor` (`legion-kube check`). It is a
// program of its own, not a subcommand of legion, because the Kubernetes
// client libraries would make every start of legion (each `legion hook`
// an agent runs) slower; the work is packages activation/kube's and
// controller/lease's, these files only parse the command line. `legion-kube
// lead` runs a team's controller on a cluster under its Lease; `legion-kube
// image` writes the worker image (package packaging/image).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/legion-dev/legion/activation/kube"
	"github.com/legion-dev/legion/activation/kube/wire"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

const usage = `Usage: legion-kube engine | check | lead [flags] -- COMMAND [ARG...] | exec [flags] -- COMMAND [ARG...] | image --out FILE.tar [flags] | --version

Legion's Kubernetes engine; people use legion (legion sessions, legion
doctor) instead.

  engine   serve the helper: JSON lines of package activation/kube/wire on
           stdin and stdout (spawn, kill, list, team stop, session events)
  check    read a team's target and its controller's Lease (JSON,
           wire.CheckRequest) on stdin and check them as the helper and
           the controller will use them: kubeconfig and context, API
           server, namespace, RBAC, storage class, the image in its
           registry, the Lease's verbs and holder; print the findings
           (JSON, wire.Report), each ok, warn or fail with what to fix
  lead     run COMMAND only while holding a Lease (--namespace, --name;
           --kubeconfig, --context outside a pod): a team's controller on
           a cluster, legion-kube lead --namespace NS --name
           legion-controller-SHORT -- legion controller TEAM
           --with-helper; exits with COMMAND's status
  exec     run COMMAND in a session's pod (--pod, --namespace; --kubeconfig,
           --context) through the API server, this program's stdin, stdout
           and stderr its streams: the helper's way to a worker on a
           cluster (attach, input), with legion-pty-worker --connect
  image    write the worker image, built from scratch out of Legion's
           binaries (--bin: beside this program, else ./bin) and the
           pinned agent CLIs in Legion's cache (--cli claude,codex,...),
           as an OCI image layout tar file (--out); print its digest
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || len(args) > 1 && args[0] != "lead" && args[0] != "image" && args[0] != "exec" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	switch args[0] {
	case "--version":
		fmt.Fprintln(stdout, "legion-kube", version)
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "lead":
		return lead(ctx, args[1:], stderr)
	case "exec":
		return execCmd(ctx, args[1:], stdin, stdout, stderr)
	case "image":
		return imageCmd(ctx, args[1:], stdout, stderr)
	case "engine":
		if err := kube.Serve(ctx, stdin, stdout); err != nil {
			fmt.Fprintln(stderr, "legion-kube:", err)
			return 1
		}
		return 0
	case "check":
		var req wire.CheckRequest
		if err := json.NewDecoder(io.LimitReader(stdin, 1<<20)).Decode(&req); err != nil {
			fmt.Fprintln(stderr, "legion-kube check: read the request (JSON, wire.CheckRequest) on stdin:", err)
			return 2
		}
		if err := json.NewEncoder(stdout).Encode(kube.Check(ctx, req)); err != nil {
			fmt.Fprintln(stderr, "legion-kube check:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(stderr, "legion-kube: unknown command %q\n%s", args[0], usage)
	return 2
}
