package main

import (
	"encoding/pem"
	"fmt"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/packaging/image"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestImageGit: the worker image's git, in the image's root alone (chroot,
// nothing of this machine's /usr), as the image's user with the image's
// env, does what a pod does with the team's repository: a clone, a
// worktree, a commit there, a merge and a push, over http and https (the
// real git http-backend, as a CGI) and over file:// (a bare repository in
// the root). For https the image's CA bundle (image.CACerts) is replaced
// by the test server's certificate: git verifies the server with that
// file and no GIT_SSL_CAINFO. The root gets the devices a container
// runtime gives every container (/dev/null, /dev/urandom...). Then a pod
// on the real control plane whose container (runc, kwok's node) has that
// root runs `legion worktree clone` twice from the http server.
func TestImageGit(t *testing.T) {
	sdtest.Require(t, "running as root (chroot, mknod)", os.Geteuid() == 0)
	_, err := exec.LookPath("chroot")
	sdtest.Require(t, "chroot on $PATH", err == nil)
	execPath, err := exec.Command("git", "--exec-path").Output()
	sdtest.Require(t, "git on $PATH (apt-get install git)", err == nil)
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	_, err = os.Stat(backend)
	sdtest.Require(t, "git's http-backend (apt-get install git)", err == nil)

	bin := sdtest.KubeBinary(t)
	dir := t.TempDir()
	tarFile := filepath.Join(dir, "image.tar")
	cmd := exec.Command(bin, "image", "--out", tarFile, "--cli", "", "--name", "example.test/legion-worker:t")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("legion-kube image --out %s --cli '': %v", tarFile, err)
	}
	root, env := imageRoot(t, tarFile, dir)
	if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The devices the OCI runtime spec gives every Linux container
	// (git reads /dev/urandom for its temporary files' names).
	for _, d := range []struct {
		name         string
		major, minor uint32
	}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}} {
		p := filepath.Join(root, "dev", d.name)
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			t.Fatalf("mknod %s: %v", p, err)
		}
		if err := os.Chmod(p, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"usr/lib/python3", "usr/bin/perl", "etc/gitconfig"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("the image has /%s; want only what git and Legion need", p)
		}
	}

	// The team's repository: one commit on main, served over http and
	// https, pushes allowed.
	srv := t.TempDir()
	bare := filepath.Join(srv, "demo.git")
	hostGit(t, "", "init", "-q", "--bare", "-b", "main", bare)
	hostGit(t, bare, "config", "http.receivepack", "true")
	seed := filepath.Join(dir, "seed")
	hostGit(t, "", "init", "-q", "-b", "main", seed)
	if err := os.WriteFile(filepath.Join(seed, "README"), []byte("demo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostGit(t, seed, "add", "README")
	hostGit(t, seed, "-c", "user.name=Seed", "-c", "user.email=seed@example.test", "commit", "-q", "-m", "seed")
	hostGit(t, seed, "push", "-q", bare, "main")
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + srv, "GIT_HTTP_EXPORT_ALL=1"}}
	plain := httptest.NewServer(h)
	t.Cleanup(plain.Close)
	tls := httptest.NewTLSServer(h)
	t.Cleanup(tls.Close)
	inImage := func(t *testing.T, argv ...string) string {
		t.Helper()
		cmd := exec.Command("chroot", append([]string{"--userspec=1000:1000", root}, argv...)...)
		cmd.Env = env
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("chroot %s %s: %v\n%s", root, strings.Join(argv, " "), err, out)
		}
		return string(out)
	}
	// With the host's CA bundle the test server is not trusted: git
	// verifies it with that file.
	cmd = exec.Command("chroot", "--userspec=1000:1000", root, "git", "ls-remote", tls.URL+"/demo.git")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "certificate") {
		t.Errorf("git ls-remote %s with the host's CA bundle = %v, %q; want a certificate error", tls.URL, err, out)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tls.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(root, image.CACerts), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/nsswitch.conf")); err != nil || !strings.Contains(string(b), "\nhosts: files dns\n") {
		t.Errorf("the image's /etc/nsswitch.conf = %q, %v; want hosts: files dns (/etc/hosts first, as Debian's)", b, err)
	}
	// The server by name, from /etc/hosts as a kubelet writes it (a pod's
	// hostAliases): its certificate is for example.com and 127.0.0.1.
	if err := os.WriteFile(filepath.Join(root, "etc/hosts"), []byte("127.0.0.1\tlocalhost\n127.0.0.1\texample.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tlsURL := strings.Replace(tls.URL, "127.0.0.1", "example.com", 1)
	// A repository in the image's root, for the local transport.
	local := filepath.Join(root, "legion/local.git")
	hostGit(t, "", "clone", "-q", "--bare", bare, local)
	if err := chownTree(local, image.UID, image.GID); err != nil {
		t.Fatal(err)
	}

	who := []string{"-c", "user.name=Legion", "-c", "user.email=legion@example.test"}
	for _, tc := range []struct{ name, url, origin string }{
		{"http", plain.URL + "/demo.git", bare},
		{"https", tlsURL + "/demo.git", bare},
		{"file", "file:///legion/local.git", local},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo, wt := "/legion/"+tc.name, "/legion/"+tc.name+"-ENG-1"
			inImage(t, "git", "clone", "-q", tc.url, repo)
			if _, err := os.Stat(filepath.Join(root, repo, ".git/description")); err != nil {
				t.Errorf("the clone has no .git/description (git's templates): %v", err)
			}
			inImage(t, "git", "-C", repo, "worktree", "add", "-q", "-b", "ENG-1", wt)
			inImage(t, "sh", "-c", "echo "+tc.name+" > "+wt+"/"+tc.name+".txt")
			inImage(t, "git", "-C", wt, "add", tc.name+".txt")
			inImage(t, append(append([]string{"git", "-C", wt}, who...), "commit", "-q", "-m", "ENG-1 over "+tc.name)...)
			inImage(t, append(append([]string{"git", "-C", repo}, who...), "merge", "-q", "--no-ff", "-m", "Merge ENG-1 over "+tc.name, "ENG-1")...)
			inImage(t, "git", "-C", repo, "push", "-q", "origin", "main")
			if got := hostGit(t, tc.origin, "show", "main:"+tc.name+".txt"); got != tc.name+"\n" {
				t.Errorf("origin %s main:%s.txt = %q; want %q (pushed from the image)", tc.origin, tc.name, got, tc.name+"\n")
			}
			if got := hostGit(t, tc.origin, "log", "-1", "--format=%s", "main"); got != "Merge ENG-1 over "+tc.name+"\n" {
				t.Errorf("origin %s main is %q; want the image's merge", tc.origin, got)
			}
		})
	}

	// In a pod whose root is the image's (runc on a kwok node), Legion's
	// own clone of the team's repository, twice (a clone, then a fetch
	// and reset to origin's main), as a pod of a team on a cluster does
	// before its agent starts.
	t.Run("pod", func(t *testing.T) {
		c := kubetest.Start(t, kubetest.Options{RunPods: true, PodRoot: root, PodEnv: env})
		url := plain.URL + "/demo.git"
		script := "legion worktree clone " + url + " /legion/repo && legion worktree clone " + url + " /legion/repo && " +
			"git -C /legion/repo config legion.clone && git -C /legion/repo log -1 --format=%s && " +
			"if [ -e /usr/bin/perl ]; then echo the host root; else echo the image root; fi"
		uid, no, backoff := int64(image.UID), false, int32(0)
		job, err := c.Client.BatchV1().Jobs("default").Create(t.Context(), &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "clone"},
			Spec: batchv1.JobSpec{
				BackoffLimit: &backoff,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: &no,
					SecurityContext:              &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid},
					Containers: []corev1.Container{{Name: "worker", Image: "legion-worker:test",
						Command: []string{"sh", "-c", script}}},
				}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create Job: %v", err)
		}
		var pod string
		waitfor.Check(t, 2*time.Minute, "Job clone done", func() error {
			j, err := c.Client.BatchV1().Jobs("default").Get(t.Context(), job.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if j.Status.Succeeded+j.Status.Failed == 0 {
				return fmt.Errorf("job status %+v", j.Status)
			}
			pods, err := c.Client.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(job.UID)})
			if err != nil || len(pods.Items) != 1 {
				return fmt.Errorf("the Job's pods: %v, %v", pods, err)
			}
			pod = pods.Items[0].Name
			return nil
		})
		b, err := c.Client.CoreV1().Pods("default").GetLogs(pod, &corev1.PodLogOptions{Container: "worker"}).DoRaw(t.Context())
		if err != nil {
			t.Fatalf("pods/log of %s: %v", pod, err)
		}
		if got, want := string(b), "true\nMerge ENG-1 over https\nthe image root\n"; got != want {
			t.Errorf("pods/log of %s = %q; want %q (Legion's clone of origin's main, in the image's root)", pod, got, want)
		}
	})
}

// imageRoot reads the image of the OCI layout tar file, extracts its
// layers into dir/root and returns that root and the image's env.
func imageRoot(t *testing.T, tarFile, dir string) (string, []string) {
	t.Helper()
	lay := filepath.Join(dir, "layout")
	untar(t, openFile(t, tarFile), lay)
	idx, err := layout.ImageIndexFromPath(lay)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("%s lists %d images; want 1", tarFile, len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	rc := mutate.Extract(img)
	defer rc.Close()
	untar(t, rc, root)
	return root, cf.Config.Env
}

// hostGit runs this machine's git in dir and returns its output.
func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

func chownTree(dir string, uid, gid int) error {
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
