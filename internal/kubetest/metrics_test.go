package kubetest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/legion-dev/legion/internal/kubetest"
)

func TestParseRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want kubetest.Requests
	}{
		{"counts summed over codes", `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="status",verb="PUT",version="v1"} 1.5e+01
`, kubetest.Requests{"POST secrets": 5, "PUT jobs/status": 15}},
		{"watches, connects and no resource left out", `apiserver_request_total{code="200",resource="pods",verb="WATCH"} 7
apiserver_request_total{code="101",resource="pods",subresource="exec",verb="CONNECT"} 1
apiserver_request_total{code="200",resource="",verb="GET"} 40
apiserver_request_total{code="200",resource="pods",verb="LIST"} 2
`, kubetest.Requests{"LIST pods": 2}},
		{"other metrics and a timestamp", `apiserver_request_total_other{resource="pods",verb="GET"} 9
apiserver_request_duration_seconds_bucket{resource="pods",verb="GET",le="0.1"} 4
apiserver_request_total{resource="pods",verb="GET"} 4 1700000000000
`, kubetest.Requests{"GET pods": 4}},
		{"escaped label values", `apiserver_request_total{resource="a\"b\\c",verb="GET"} 1
`, kubetest.Requests{`GET a"b\c`: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := kubetest.ParseRequests([]byte(tc.text))
			if err != nil {
				t.Fatalf("ParseRequests: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseRequests (-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []string{
		`apiserver_request_total{verb="GET",resource="pods"}`,
		`apiserver_request_total{verb="GET,resource="pods"} 1`,
		`apiserver_request_total{verb=GET} 1`,
		`apiserver_request_total{verb="GET"} one`,
	} {
		if _, err := kubetest.ParseRequests([]byte(bad + "\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("ParseRequests(%q) = %v; want an error naming line 1", bad, err)
		}
	}
}

func FuzzParseRequests(f *testing.F) {
	f.Add([]byte(`apiserver_request_total{code="200",resource="pods",subresource="status",verb="PATCH"} 3` + "\n"))
	f.Add([]byte(`apiserver_request_total{resource="a\"b",verb="GET"} 1e3 17`))
	f.Add([]byte("apiserver_request_total 1\n# comment\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		r, err := kubetest.ParseRequests(text)
		if err != nil {
			return
		}
		for k := range r {
			if verb, res, ok := strings.Cut(k, " "); !ok || verb == "WATCH" || verb == "CONNECT" || res == "" {
				t.Errorf("ParseRequests(%q) has key %q; want VERB resource, no watch or connect", text, k)
			}
		}
	})
}

// TestRequests: the API server's own count sees the requests the test
// makes, on a resource no component of the cluster touches here
// (secrets: config maps, say, are made by the root CA publisher in every
// namespace).
func TestRequests(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{Nodes: -1})
	before := c.Requests(t)
	for i := range 3 {
		if _, err := c.Client.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("counted-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Client.CoreV1().Secrets("default").Get(t.Context(), "counted-0", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	got := c.Requests(t).Sub(before).Only("secrets")
	if diff := cmp.Diff(kubetest.Requests{"POST secrets": 3, "GET secrets": 1}, got); diff != "" {
		t.Errorf("requests on secrets between two reads (-want +got):\n%s", diff)
	}
}
