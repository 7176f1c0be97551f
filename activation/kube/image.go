package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// ImageTimeout bounds CheckImage: a registry that does not answer must
// not hold `legion doctor` up.
const ImageTimeout = 5 * time.Second

// ImageProblem says why CheckImage could not find an image.
type ImageProblem int

// Image problems. Only ImageMissing and ImageInvalid are certain: a
// registry this machine cannot reach or may not read may still serve
// the cluster's nodes, which pull with their own network and the pull
// secrets of the namespace's service account.
const (
	ImageInvalid     ImageProblem = iota + 1 // not an image reference
	ImageMissing                             // the registry answered: no such repository or tag
	ImageDenied                              // the registry refused this machine's credentials
	ImageUnreachable                         // no answer from the registry (refused, timed out, TLS)
)

// ImageError is CheckImage's error: which image, what went wrong, why.
type ImageError struct {
	Image   string
	Problem ImageProblem
	Err     error
}

func (e *ImageError) Error() string {
	switch e.Problem {
	case ImageInvalid:
		return fmt.Sprintf("image %q is not an image reference: %v", e.Image, e.Err)
	case ImageMissing:
		return fmt.Sprintf("image %s is not in its registry (no such repository or tag): %v", e.Image, e.Err)
	case ImageDenied:
		return fmt.Sprintf("the registry of image %s refused this machine's credentials (Docker config): %v", e.Image, e.Err)
	}
	return fmt.Sprintf("the registry of image %s did not answer: %v", e.Image, e.Err)
}

func (e *ImageError) Unwrap() error { return e.Err }

// CheckImage asks image's registry for its manifest (a HEAD request, as
// `crane digest` does) and returns its digest. It authenticates as the
// Docker config of this machine says ($DOCKER_CONFIG, else
// ~/.docker/config.json, and its credential helpers), else anonymously;
// it reads no pull secret of the cluster. It tries once and gives up
// after timeout (ImageTimeout when 0). A failure is an *ImageError.
func CheckImage(ctx context.Context, image string, timeout time.Duration) (string, error) {
	if timeout <= 0 {
		timeout = ImageTimeout
	}
	ref, err := name.ParseReference(image)
	if err != nil {
		return "", &ImageError{Image: image, Problem: ImageInvalid, Err: err}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("no answer within %v", timeout))
	defer cancel()
	d, err := remote.Head(ref,
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithRetryBackoff(remote.Backoff{Steps: 1}))
	if err == nil {
		return d.Digest.String(), nil
	}
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	problem := ImageUnreachable
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusNotFound:
			problem = ImageMissing
		case http.StatusUnauthorized, http.StatusForbidden:
			problem = ImageDenied
		}
	}
	return "", &ImageError{Image: image, Problem: problem, Err: err}
}
