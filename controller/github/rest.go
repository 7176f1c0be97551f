package github

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// restBase is the REST API's root for the GraphQL endpoint: api.github.com
// for GitHub's, https://HOST/api/v3 for GitHub Enterprise's
// (https://HOST/api/graphql), the endpoint's scheme and host for any other
// (a test's).
func restBase(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("github: the endpoint %q is not a URL: %v", endpoint, err)
	}
	path := strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/graphql")
	if strings.HasSuffix(path, "/api") {
		path += "/v3"
	} else if u.Host != "api.github.com" {
		path = ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: path}).String(), nil
}

// changed asks GitHub's REST API whether the answer of path changed since
// the last time it asked: a conditional request with the ETag of the last
// answer (If-None-Match), which GitHub answers 304 Not Modified when
// nothing changed, without counting it against the rate limit. The first
// request, a failure of any kind and any answer but 304 say "changed":
// the caller then reads the whole board, as without this probe.
func (c *Client) changed(ctx context.Context, path string) bool {
	c.mu.Lock()
	etag := c.etags[path]
	c.mu.Unlock()
	resp, _, err := c.get(ctx, path, etag)
	if err != nil {
		return true
	}
	switch resp.StatusCode {
	case http.StatusNotModified:
		return false
	case http.StatusOK:
		c.mu.Lock()
		c.etags[path] = resp.Header.Get("ETag")
		c.mu.Unlock()
	}
	return true
}

// get GETs path of the REST API (with If-None-Match etag when not "")
// and returns the answer (its body read, at most 1 MiB, and closed).
func (c *Client) get(ctx context.Context, path, etag string) (*http.Response, []byte, error) {
	base, err := restBase(c.opts.Endpoint)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("Authorization", "Bearer "+c.token)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	hc := c.opts.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp, body, err
}

// CanWrite says whether login may write to the repository (its
// permission is admin, maintain or write), by GitHub's REST API
// (GET /repos/OWNER/REPO/collaborators/LOGIN/permission).
func (c *Client) CanWrite(ctx context.Context, login string) (bool, error) {
	path := "/repos/" + url.PathEscape(c.opts.Owner) + "/" + url.PathEscape(c.opts.Repo) + "/collaborators/" + url.PathEscape(login) + "/permission"
	resp, body, err := c.get(ctx, path, "")
	if err != nil {
		return false, fmt.Errorf("github: permission of %s on %s: %w", login, c.repo(), err)
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("github: permission of %s on %s: HTTP %d", login, c.repo(), resp.StatusCode)
	}
	var p struct {
		Permission string `json:"permission"`
		RoleName   string `json:"role_name"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return false, fmt.Errorf("github: permission of %s on %s: %w: %v", login, c.repo(), ErrMalformed, err)
	}
	switch p.Permission {
	case "admin", "write":
		return true, nil
	}
	return p.RoleName == "maintain", nil
}

// boardChanged says whether anything Legion's board reads may have changed
// since the last probe: the most recently updated issue with label and the
// most recently updated pull request (a comment, a label, a review, a
// push, a merge each update theirs). Both are asked, each at most one
// request that costs nothing when nothing changed.
func (c *Client) boardChanged(ctx context.Context, label string) bool {
	repo := "/repos/" + url.PathEscape(c.opts.Owner) + "/" + url.PathEscape(c.opts.Repo)
	issues := c.changed(ctx, repo+"/issues?labels="+url.QueryEscape(label)+"&state=all&sort=updated&direction=desc&per_page=1")
	pulls := c.changed(ctx, repo+"/pulls?state=all&sort=updated&direction=desc&per_page=1")
	return issues || pulls
}
