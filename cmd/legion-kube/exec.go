package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube"
)

// execCmd is `legion-kube exec --pod POD [target flags] -- COMMAND...`:
// COMMAND in the pod's worker container through the API server, with
// this process's stdin, stdout and stderr as its streams. The helper runs
// it with a socket as stdin and stdout for attach and input.
func execCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("legion-kube exec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var t api.KubeTarget
	fs.StringVar(&t.Kubeconfig, "kubeconfig", "", "the kubeconfig `FILE` (default $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&t.Context, "context", "", "the kubeconfig's `CONTEXT` (default its current one)")
	fs.StringVar(&t.Namespace, "namespace", "", "the pod's `NAMESPACE`")
	pod := fs.String("pod", "", "the `POD`")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if t.Namespace == "" || *pod == "" || fs.NArg() == 0 {
		fmt.Fprintln(stderr, "legion-kube exec: want --namespace NS --pod POD -- COMMAND [ARG...]")
		return 2
	}
	if err := kube.Exec(ctx, t, *pod, fs.Args(), stdin, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "legion-kube exec:", err)
		return 1
	}
	return 0
}
