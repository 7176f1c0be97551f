package dashboard

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzDecodeHook: any body under any content type decodes or fails with
// an error, never a panic; a payload that checkRepo accepts names the
// team's repository or its owner; and a JSON body decodes the same sent
// as the form's payload field.
func FuzzDecodeHook(f *testing.F) {
	for _, body := range []string{issueOpened, otherRepo, projectItem, otherOrgItem, repoPing, `{}`, `null`, `{"repository":null,"organization":{"login":""}}`, `{"repository":{"full_name":7}}`, "\xff"} {
		f.Add("application/json", body)
		f.Add("application/x-www-form-urlencoded", "payload="+url.QueryEscape(body))
	}
	f.Add("application/json; charset=utf-8", issueOpened)
	f.Add("text/plain", issueOpened)
	f.Add("", "")
	f.Add("application/x-www-form-urlencoded", "payload=%zz")
	f.Fuzz(func(t *testing.T, contentType, body string) {
		p, err := decodeHook(contentType, []byte(body))
		if err != nil {
			return
		}
		if p.checkRepo("acme/widgets") == nil {
			switch {
			case p.Repository != nil:
				if !strings.EqualFold(p.Repository.FullName, "acme/widgets") {
					t.Errorf("checkRepo accepted repository %q", p.Repository.FullName)
				}
			case p.Organization == nil || !strings.EqualFold(p.Organization.Login, "acme"):
				t.Errorf("checkRepo accepted %+v", p)
			}
		}
		if strings.HasPrefix(contentType, "application/json") {
			q, err := decodeHook("application/x-www-form-urlencoded", []byte("payload="+url.QueryEscape(body)))
			if err != nil {
				t.Fatalf("decodeHook(form of %q) = %v; the JSON body decoded", body, err)
			}
			if (p.Repository == nil) != (q.Repository == nil) || (p.Repository != nil && p.Repository.FullName != q.Repository.FullName) ||
				(p.Organization == nil) != (q.Organization == nil) || (p.Organization != nil && p.Organization.Login != q.Organization.Login) {
				t.Errorf("decodeHook(%q) = %+v as JSON, %+v as a form", body, p, q)
			}
		}
	})
}
