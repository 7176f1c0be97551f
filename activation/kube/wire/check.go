package wire

import "github.com/legion-dev/legion/activation/api"

// CheckRequest is what `legion doctor` writes to `legion-kube check` on
// its stdin (JSON): the team's target and the name of its controller's
// Lease.
type CheckRequest struct {
	api.KubeTarget
	// Lease is the team's controller Lease (ControllerLease); "" checks no
	// Lease.
	Lease string `json:"lease,omitempty"`
}

// ControllerLease is the name of the Lease that `legion controller TEAM`
// holds in the team's namespace, short being the team's short id
// (controller/lease.ControllerName is this).
func ControllerLease(short string) string { return "legion-controller-" + short }

// Finding names of a Report.
const (
	FindingCluster = "cluster" // kubeconfig, API server, namespace, the engine's verbs, storage class
	FindingImage   = "image"   // the worker image in its registry
	FindingLease   = "lease"   // the controller's Lease: its verbs, its holder
)

// Finding statuses, as `legion doctor`'s: only StatusFail is a problem
// for certain; StatusWarn is one seen from this machine that the
// cluster's nodes may not have.
const (
	StatusOK   = "ok"
	StatusWarn = "warn"
	StatusFail = "fail"
)

// Finding is one thing `legion-kube check` found out.
type Finding struct {
	Name   string `json:"name"` // FindingCluster, FindingImage or FindingLease
	Status string `json:"status"`
	Detail string `json:"detail"`        // what was found
	Fix    string `json:"fix,omitempty"` // what to do, when not ok
}

// Report is what `legion-kube check` prints on its stdout (JSON): a
// Finding for the cluster, for the image and, when the request names
// one, for the Lease.
type Report struct {
	Findings []Finding `json:"findings"`
}
