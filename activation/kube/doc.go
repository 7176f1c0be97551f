// Package kube is Legion's Kubernetes engine: a team's sessions (engine =
// "kubernetes") as Jobs on its cluster, served to the helper by
// `legion-kube engine` over package wire's JSON lines (Serve), and
// `legion doctor`'s check of a team's cluster (Check).
//
// It owns:
//   - what a session becomes (objects.go, Build): a batch/v1 Job whose
//     pod runs legion-pty-worker hardened (non-root, no privilege
//     escalation, no capabilities, seccomp RuntimeDefault, read-only
//     root, no service-account token), restarted by the Job controller
//     (restartPolicy Never, podReplacementPolicy Failed), failed for good
//     on exit 78 and not charged for a lost node (podFailurePolicy), its
//     spec (with the control token) in a Secret owned by the Job, and one
//     PersistentVolumeClaim per issue that every phase mounts;
//   - the Engine (engine.go) of one target (kubeconfig, context,
//     namespace): spawn, kill, team stop, and each session's state from
//     its Job, its pods and the Job controller's refusals to make them
//     (FailedCreate events: "quota exceeded"), followed with informers
//     (pods indexed by session, events by Job), a change reported by the
//     session's id;
//   - what the helper's user must be allowed (Permissions, and
//     LeasePermission for a controller) and `legion doctor`'s check of a
//     team (check.go): the cluster, the worker image in its registry
//     (CheckImage, with this machine's Docker credentials), the Lease.
//
// It never decides what runs (the controller and `legion spawn` do, the
// helper checks their launch), never writes a secret into a Job's spec,
// env or argv, never deletes an issue's volume, and is linked only by
// legion-kube: the Kubernetes client would make every start of legion,
// which each agent hook runs, slower (internal/layout keeps it out).
package kube
