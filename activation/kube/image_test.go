package kube

import (
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry starts go-containerregistry's in-process registry (the
// distribution API's wire format) on a loopback address, pushes a random
// image to it as repo:tag and returns the registry's host:port and the
// image's digest.
func testRegistry(t *testing.T, repo, tag string) (host, digest string) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host = strings.TrimPrefix(srv.URL, "http://")
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(host + "/" + repo + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return host, d.String()
}

// silentListener accepts connections and never answers on them: a
// registry that hangs.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() { // ends when the listener is closed
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return l.Addr().String()
}

// lockedRegistry is a registry that wants credentials this machine has
// not got: every request without an Authorization header is answered 401
// with a Basic challenge, as a private registry answers.
func lockedRegistry(t *testing.T) string {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			w.Header().Set("WWW-Authenticate", `Basic realm="legion-test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestCheckImage: CheckImage against a real registry's wire format: an
// image that is there gives its digest; a missing tag or repository is
// ImageMissing; a registry that refuses connections or never answers is
// ImageUnreachable, the latter after the timeout, not later; a bad
// reference is ImageInvalid. Each error names the image.
func TestCheckImage(t *testing.T) {
	host, digest := testRegistry(t, "legion-worker", "1")
	got, err := CheckImage(t.Context(), host+"/legion-worker:1", 0)
	if err != nil || got != digest {
		t.Fatalf("CheckImage(%s/legion-worker:1) = %q, %v; want %s", host, got, err, digest)
	}
	for _, tc := range []struct {
		name, image string
		want        ImageProblem
		wantMsg     string
	}{
		{"missing tag", host + "/legion-worker:2", ImageMissing, "is not in its registry (no such repository or tag)"},
		{"missing repository", host + "/nothing:1", ImageMissing, "is not in its registry"},
		{"credentials refused", lockedRegistry(t) + "/legion-worker:1", ImageDenied, "refused this machine's credentials"},
		{"connection refused", closedAddr(t) + "/legion-worker:1", ImageUnreachable, "did not answer"},
		{"no answer", silentListener(t) + "/legion-worker:1", ImageUnreachable, "no answer within 300ms"},
		{"not a reference", "Legion Worker:1", ImageInvalid, "is not an image reference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckImage(t.Context(), tc.image, 300*time.Millisecond)
			var ie *ImageError
			if !errors.As(err, &ie) || ie.Problem != tc.want {
				t.Fatalf("CheckImage(%s) = %v; want an ImageError with problem %d", tc.image, err, tc.want)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.image) && !strings.Contains(msg, `"`+tc.image+`"`) || !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("CheckImage(%s) = %q; want it to name the image and say %q", tc.image, msg, tc.wantMsg)
			}
		})
	}
}
