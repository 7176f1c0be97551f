package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/activation/api"
)

// TestConfigInCluster: with KUBERNETES_SERVICE_HOST set and no
// kubeconfig anywhere, Config is the pod's service account (client-go's
// rest.InClusterConfig, whatever the target's context); a kubeconfig
// file, or no KUBERNETES_SERVICE_HOST, keeps the kubeconfig's way.
// TestControllerPod (contrib/kubernetes) uses it with a real token.
func TestConfigInCluster(t *testing.T) {
	const tokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	if _, err := os.Stat(tokenFile); err == nil {
		t.Skip("this machine has a service account token (" + tokenFile + "): the test wants none")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	target := api.KubeTarget{Context: "prod", Namespace: "legion"}

	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := Config(target); err == nil || !strings.Contains(err.Error(), "~/.kube/config") {
		t.Errorf("Config outside a pod, no kubeconfig = %v; want the kubeconfig's error", err)
	}

	t.Setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	_, err := Config(target)
	if err == nil || !strings.Contains(err.Error(), "service account") || !strings.Contains(err.Error(), tokenFile) {
		t.Errorf("Config in a pod with no kubeconfig and no token = %v; want an error naming the service account and %s", err, tokenFile)
	}

	kc := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://prod.example:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: prod, context: {cluster: c, user: u}}]
`
	// $KUBECONFIG, not ~/.kube/config: client-go reads $HOME once, at
	// its start.
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", path)
	cfg, err := Config(target)
	if err != nil || cfg.Host != "https://prod.example:6443" {
		t.Errorf("Config with $KUBECONFIG in a pod = %+v, %v; want the kubeconfig's context prod", cfg, err)
	}
}
