package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/team"
)

// MaxWebhookBody is the largest webhook body read: GitHub caps a
// delivery's payload at 25 MB
// (https://docs.github.com/en/webhooks/webhook-events-and-payloads).
const MaxWebhookBody = 25 << 20

// SignatureHeader carries a delivery's signature: "sha256=" and the hex
// HMAC-SHA256 of the raw body under the webhook's secret
// (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries).
const SignatureHeader = "X-Hub-Signature-256"

// WebhookEvents are the GitHub events (X-GitHub-Event) that wake a team's
// controller: its issues, their comments and labels, pull requests and
// their reviews, and items of its Projects board (an organization's
// webhook). "ping", sent when a webhook is made, is answered and wakes
// nothing; other events are answered and ignored.
var WebhookEvents = []string{"issues", "issue_comment", "label", "pull_request", "pull_request_review", "projects_v2_item"}

// seenDeliveries is how many verified bodies are remembered to refuse a
// replay.
const seenDeliveries = 1024

// hooks remembers the digests of the last verified bodies: the signature
// covers the body only, with no time in it, so a delivery captured on its
// way (the dashboard speaks plain HTTP unless a proxy adds TLS) could
// otherwise be sent again and again to make the controller tick, and
// spend the team's GitHub rate limit, without the secret.
type hooks struct {
	mu   sync.Mutex
	seen map[[sha256.Size]byte]bool
	ring [][sha256.Size]byte // in arrival order, at most seenDeliveries
}

// firstTime records the digest d and reports whether it is new.
func (h *hooks) firstTime(d [sha256.Size]byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen[d] {
		return false
	}
	if h.seen == nil {
		h.seen = map[[sha256.Size]byte]bool{}
	}
	if len(h.ring) == seenDeliveries {
		delete(h.seen, h.ring[0])
		h.ring = h.ring[1:]
	}
	h.seen[d] = true
	h.ring = append(h.ring, d)
	return true
}

// webhookAnswer is the body of every answer but errors.
type webhookAnswer struct {
	// Woken is the team whose controller was woken; Ignored says why
	// nothing was done.
	Woken   string `json:"woken,omitempty"`
	Ignored string `json:"ignored,omitempty"`
}

// githubHook is POST /hooks/github/{team}, a team's GitHub webhook. It
// needs no token: the delivery's signature is its authentication, checked
// before anything of the body is decoded. In order:
//   - 404 for a team that does not exist or has no
//     github.webhook_secret_file (one answer for both, so that the
//     endpoint does not tell strangers the team names);
//   - 401 without a well-formed X-Hub-Signature-256, before the body is
//     read; 413 for a body over MaxWebhookBody, of which no more is read;
//     403 when the signature is not the body's under the team's secret.
//     Each refusal is logged with the team and the remote address, never
//     the secret or the body;
//   - 400 for a payload of another repository than github.repo (or, for
//     an organization's event with no repository, another owner), or one
//     that does not decode;
//   - 200 for a ping, an event not in WebhookEvents, a team whose
//     controller is an agent, or a body already seen (a replay); 202 once the controller's wake file is written
//     (team.Wake): the controller ticks at once, and otherwise at its
//     interval as always.
func (s *Server) githubHook(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("team")
	log := s.log.With("team", name, "remote", r.RemoteAddr,
		"event", headerToken(r.Header.Get("X-GitHub-Event")), "delivery", headerToken(r.Header.Get("X-GitHub-Delivery")))
	cfg, err := config.LoadOrEmpty(s.opts.ConfigPath)
	if err != nil {
		log.Error("github webhook: read the config", "err", err)
		writeError(w, http.StatusInternalServerError, "the dashboard cannot read its legion.toml: see its log (journalctl --user -u legion-web)")
		return
	}
	t, ok := cfg.Team(name)
	if !ok {
		log.Warn("github webhook refused: no such team")
		writeError(w, http.StatusNotFound, "no GitHub webhook for team %q here: no such team, or it has no github.webhook_secret_file", name)
		return
	}
	secret, err := team.WebhookSecret(t)
	if errors.Is(err, team.ErrNoWebhook) {
		log.Warn("github webhook refused: the team has no github.webhook_secret_file")
		writeError(w, http.StatusNotFound, "no GitHub webhook for team %q here: no such team, or it has no github.webhook_secret_file", name)
		return
	}
	if err != nil {
		log.Error("github webhook: read the secret", "err", err)
		writeError(w, http.StatusInternalServerError, "the dashboard cannot read team %q's webhook secret: see its log (journalctl --user -u legion-web)", name)
		return
	}
	mac, err := parseSignature(r.Header.Get(SignatureHeader))
	if err != nil {
		log.Warn("github webhook refused: no valid signature", "err", err)
		writeError(w, http.StatusUnauthorized, "%v", err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			log.Warn("github webhook refused: body too large", "limit", MaxWebhookBody)
			writeError(w, http.StatusRequestEntityTooLarge, "the body is larger than %d bytes, GitHub's largest payload", MaxWebhookBody)
			return
		}
		log.Warn("github webhook: read the body", "err", err)
		writeError(w, http.StatusBadRequest, "read the body: %v", err)
		return
	}
	if !validSignature([]byte(secret), body, mac) {
		log.Warn("github webhook refused: the signature does not match the body under the team's secret")
		writeError(w, http.StatusForbidden, "%s does not match the body: is the webhook's secret the one in team %q's github.webhook_secret_file?", SignatureHeader, name)
		return
	}
	p, err := decodeHook(r.Header.Get("Content-Type"), body)
	if err != nil {
		log.Warn("github webhook: undecodable payload", "err", err)
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if err := p.checkRepo(t.GitHub.Repo); err != nil {
		log.Warn("github webhook refused: another repository", "err", err)
		writeError(w, http.StatusBadRequest, "team %q: %v", name, err)
		return
	}
	event := r.Header.Get("X-GitHub-Event")
	switch {
	case event == "ping":
		log.Info("github webhook: ping")
		writeJSON(w, http.StatusOK, webhookAnswer{Ignored: "ping: the webhook reaches Legion"})
		return
	case !slices.Contains(WebhookEvents, event):
		writeJSON(w, http.StatusOK, webhookAnswer{Ignored: fmt.Sprintf("event %q: Legion acts on %s", headerToken(event), strings.Join(WebhookEvents, ", "))})
		return
	}
	if t.Controller == config.ControllerAgent {
		writeJSON(w, http.StatusOK, webhookAnswer{Ignored: fmt.Sprintf("team %q's controller is an agent (controller = \"agent\"), which reads the tracker at its own pace", name)})
		return
	}
	if !s.hooks.firstTime(sha256.Sum256(body)) {
		log.Warn("github webhook: a body seen before (a redelivery or a replay); not woken again")
		writeJSON(w, http.StatusOK, webhookAnswer{Ignored: "this delivery's body was seen before: the controller was woken for it then"})
		return
	}
	state, err := config.StateDir()
	if err == nil {
		err = team.Wake(team.StateDir(t, state), fmt.Sprintf("github %s delivery %s", headerToken(event), headerToken(r.Header.Get("X-GitHub-Delivery"))))
	}
	if err != nil {
		log.Error("github webhook: wake the controller", "err", err)
		writeError(w, http.StatusInternalServerError, "wake team %q's controller: see the dashboard's log (journalctl --user -u legion-web)", name)
		return
	}
	log.Info("github webhook: woke the controller")
	writeJSON(w, http.StatusAccepted, webhookAnswer{Woken: name})
}

// headerToken is a header's value as logs and the wake file show it: at
// most 64 bytes of letters, digits, '-', '_' and '.', the rest replaced
// by '?'. The event and delivery headers are not covered by the
// signature.
func headerToken(v string) string {
	if len(v) > 64 {
		v = v[:64]
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '?'
	}, v)
}

// parseSignature reads X-Hub-Signature-256: "sha256=" and 64 hex digits.
func parseSignature(h string) ([]byte, error) {
	if h == "" {
		return nil, fmt.Errorf("no %s header: give the webhook a secret (the one in the team's github.webhook_secret_file)", SignatureHeader)
	}
	hexMAC, ok := strings.CutPrefix(h, "sha256=")
	mac, err := hex.DecodeString(hexMAC)
	if !ok || err != nil || len(mac) != sha256.Size {
		return nil, fmt.Errorf("%s: want sha256= followed by %d hex digits (the HMAC-SHA256 of the body)", SignatureHeader, 2*sha256.Size)
	}
	return mac, nil
}

// validSignature reports whether mac is HMAC-SHA256(secret, body),
// comparing in constant time.
func validSignature(secret, body, mac []byte) bool {
	h := hmac.New(sha256.New, secret)
	h.Write(body)
	return hmac.Equal(h.Sum(nil), mac)
}

// Signature is the X-Hub-Signature-256 value GitHub sends for body under
// secret (for tests and tools that deliver to the endpoint).
func Signature(secret string, body []byte) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(body)
	return "sha256=" + hex.EncodeToString(h.Sum(nil))
}

// hookPayload is what the endpoint reads of a delivery's payload: whose
// it is. Every event of a repository's webhook carries the repository;
// an organization's (projects_v2_item, its ping) carries the
// organization instead.
type hookPayload struct {
	Repository *struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
	Organization *struct {
		Login string `json:"login"`
	} `json:"organization"`
}

// decodeHook decodes a delivery's body by its Content-Type: the webhook's
// "application/json", or "application/x-www-form-urlencoded" with the
// JSON in the form's payload field.
func decodeHook(contentType string, body []byte) (hookPayload, error) {
	var p hookPayload
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return p, fmt.Errorf("content type %q: %w (set the webhook's content type to application/json)", contentType, err)
	}
	switch mt {
	case "application/json":
	case "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return p, fmt.Errorf("decode the form body: %w", err)
		}
		if !form.Has("payload") {
			return p, errors.New("decode the form body: no payload field")
		}
		body = []byte(form.Get("payload"))
	default:
		return p, fmt.Errorf("content type %q: want application/json (the webhook's content type)", mt)
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return p, fmt.Errorf("decode the JSON payload: %w", err)
	}
	return p, nil
}

// checkRepo accepts a payload of repo ("owner/name", github.repo), or,
// without a repository, of repo's owner as organization. GitHub compares
// names without case, and so does checkRepo.
func (p hookPayload) checkRepo(repo string) error {
	switch {
	case p.Repository != nil:
		if !strings.EqualFold(p.Repository.FullName, repo) {
			return fmt.Errorf("the delivery is for repository %q; the team's github.repo is %q", p.Repository.FullName, repo)
		}
	case p.Organization != nil:
		owner, _, _ := strings.Cut(repo, "/")
		if !strings.EqualFold(p.Organization.Login, owner) {
			return fmt.Errorf("the delivery is for organization %q; the team's github.repo belongs to %q", p.Organization.Login, owner)
		}
	default:
		return fmt.Errorf("the payload names no repository or organization; the team's github.repo is %q", repo)
	}
	return nil
}
