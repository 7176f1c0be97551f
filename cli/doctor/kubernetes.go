package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// kubeCheckName names the Kubernetes check of a team.
func kubeCheckName(team string) string { return "Kubernetes of team " + team }

// checkKube: can the helper run team t's sessions on its cluster? Asked
// of legion-kube check (package activation/kube's Check): the kubeconfig
// and context, the API server, the namespace, every verb the engine uses
// (by SelfSubjectAccessReview, as the kubeconfig's user) and the storage
// class. The kubeconfig is the one the helper reads:
// kubernetes.kubeconfig, else $KUBECONFIG of the user manager, else
// ~/.kube/config.
func checkKube(ctx context.Context, configPath, kubeBinary string, t config.Team, w workerEnv) Check {
	c := Check{Name: kubeCheckName(t.Name), Team: t.Name}
	target := t.KubeTarget()
	if target.Kubeconfig == "" {
		target.Kubeconfig = w.get("KUBECONFIG")
	}
	installFix := fmt.Sprintf("install %s beside legion (`make install`, or `go install github.com/legion-dev/legion/cmd/%s`)", wire.BinaryName, wire.BinaryName)
	bin := kubeBinary
	if bin == "" {
		// Found as the helper finds it.
		exe, err := os.Executable()
		if err == nil {
			bin, err = proto.FindProgram(exe, wire.BinaryName)
		}
		if err != nil {
			c.Status, c.Detail, c.Fix = Fail, err.Error(), installFix
			return c
		}
	}
	in, err := json.Marshal(target)
	if err != nil {
		c.Status, c.Detail = Fail, err.Error()
		return c
	}
	cmd := exec.CommandContext(ctx, bin, "check")
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		c.Status, c.Detail = Fail, strings.TrimSpace(stderr.String())
		c.Fix = fmt.Sprintf("fix [teams.%s.kubernetes] in %s, or the cluster, as the message says (README: Kubernetes)", tomlKey(t.Name), configPath)
	case err != nil:
		c.Status, c.Detail = Fail, fmt.Sprintf("run %s check: %v %s", bin, err, strings.TrimSpace(stderr.String()))
		c.Fix = installFix
	default:
		c.Status = OK
		c.Detail = strings.TrimSpace(stdout.String()) + "; image " + target.Image + " (pulled when a session starts: a pod that cannot pull it says so in `legion sessions list`)"
	}
	return c
}
