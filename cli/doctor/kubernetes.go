package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// Names of the Kubernetes checks of a team.
func kubeCheckName(team string) string  { return "Kubernetes of team " + team }
func imageCheckName(team string) string { return "worker image of team " + team }
func leaseCheckName(team string) string { return "controller Lease of team " + team }

// checkKube: can the helper run team t's sessions on its cluster, and its
// controller hold the team's Lease? Asked of legion-kube check (package
// activation/kube's Check), which answers three checks:
//   - the cluster: the kubeconfig and context, the API server, the
//     namespace, every verb the engine uses (by SelfSubjectAccessReview,
//     as the kubeconfig's user) and the storage class;
//   - the worker image: a HEAD of its manifest in its registry, with this
//     machine's Docker credentials (not the cluster's pull secrets);
//     a registry that answers "no such tag" fails, one this machine
//     cannot reach or may not read is a warning (the nodes may);
//   - the controller's Lease (legion-controller-<short>): the verbs a
//     controller run with this kubeconfig needs (`legion controller TEAM`
//     takes the Lease with it), and who holds the Lease now (a controller
//     on the cluster).
//
// The kubeconfig is the one the helper reads: kubernetes.kubeconfig, else
// $KUBECONFIG of the user manager, else ~/.kube/config.
func checkKube(ctx context.Context, configPath, kubeBinary string, t config.Team, w workerEnv) []Check {
	names := map[string]string{
		wire.FindingCluster: kubeCheckName(t.Name),
		wire.FindingImage:   imageCheckName(t.Name),
		wire.FindingLease:   leaseCheckName(t.Name),
	}
	fail := func(detail, fix string) []Check {
		return []Check{{Name: kubeCheckName(t.Name), Team: t.Name, Status: Fail, Detail: detail, Fix: fix}}
	}
	req := wire.CheckRequest{KubeTarget: *t.KubeTarget(), Lease: wire.ControllerLease(t.ShortID())}
	if req.Kubeconfig == "" {
		req.Kubeconfig = w.get("KUBECONFIG")
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
			return fail(err.Error(), installFix)
		}
	}
	in, err := json.Marshal(req)
	if err != nil {
		return fail(err.Error(), "")
	}
	cmd := exec.CommandContext(ctx, bin, "check")
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fail(fmt.Sprintf("run %s check: %v %s", bin, err, strings.TrimSpace(stderr.String())), installFix)
	}
	var r wire.Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || len(r.Findings) == 0 {
		return fail(fmt.Sprintf("%s check printed %q: want its findings (JSON, wire.Report): %v", bin, strings.TrimSpace(stdout.String()), err),
			"install the legion-kube of this legion's version beside it ("+installFix+")")
	}
	tableFix := fmt.Sprintf(" (in %s: [teams.%s.kubernetes]; README: Kubernetes)", configPath, tomlKey(t.Name))
	var checks []Check
	for _, f := range r.Findings {
		name, ok := names[f.Name]
		if !ok {
			name = fmt.Sprintf("Kubernetes (%s) of team %s", f.Name, t.Name)
		}
		c := Check{Name: name, Team: t.Name, Detail: f.Detail, Fix: f.Fix}
		switch f.Status {
		case wire.StatusOK:
			c.Status = OK
		case wire.StatusWarn:
			c.Status = Warn
		default:
			c.Status = Fail
		}
		if c.Status != OK && f.Name != wire.FindingLease {
			c.Fix += tableFix
		}
		checks = append(checks, c)
	}
	return checks
}

// checkClusterDispatch: can `legion controller TEAM` dispatch team t's
// issues to its cluster (team.CheckCluster: the repository its pods
// clone, a tracker they reach)?
func checkClusterDispatch(configPath string, t config.Team) Check {
	c := Check{Name: "controller dispatch of team " + t.Name, Team: t.Name, Status: OK,
		Detail: "each phase's pod clones " + t.Kubernetes.Repository + " onto the issue's volume"}
	if err := team.CheckCluster(t); err != nil {
		c.Status, c.Detail = Fail, err.Error()
		c.Fix = fmt.Sprintf("in %s: [teams.%s] (README: Kubernetes, the controller and a team on a cluster)", configPath, tomlKey(t.Name))
	}
	return c
}
