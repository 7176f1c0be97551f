package doctor

import (
	"context"
	"fmt"

	"github.com/legion-dev/legion/activation/kube"
	"github.com/legion-dev/legion/config"
)

// kubeCheckName names the Kubernetes check of a team.
func kubeCheckName(team string) string { return "Kubernetes of team " + team }

// checkKube: can the helper run team t's sessions on its cluster? The
// kubeconfig and context, the API server, the namespace, every verb the
// engine uses (kube.Permissions, asked with SelfSubjectAccessReview as
// the kubeconfig's user) and the storage class (kube.Check). The
// kubeconfig is the one the helper reads: kubernetes.kubeconfig, else
// $KUBECONFIG of the user manager, else ~/.kube/config.
func checkKube(ctx context.Context, configPath string, t config.Team, w workerEnv) Check {
	c := Check{Name: kubeCheckName(t.Name), Team: t.Name}
	target := t.KubeTarget()
	if target.Kubeconfig == "" {
		target.Kubeconfig = w.get("KUBECONFIG")
	}
	found, err := kube.Check(ctx, *target)
	if err != nil {
		c.Status, c.Detail = Fail, err.Error()
		c.Fix = fmt.Sprintf("fix [teams.%s.kubernetes] in %s, or the cluster, as the message says (README: Kubernetes)", tomlKey(t.Name), configPath)
		return c
	}
	c.Status, c.Detail = OK, found+"; image "+target.Image+" (pulled when a session starts: a pod that cannot pull it says so in `legion sessions list`)"
	return c
}
