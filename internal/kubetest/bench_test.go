package kubetest_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/legion-dev/legion/internal/benchreport"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
)

// BenchmarkStart: how long a test waits for a cluster of one node, and for
// one of 100 nodes.
func BenchmarkStart(b *testing.B) {
	for _, nodes := range []int{1, 100} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			var ds []time.Duration
			for b.Loop() {
				begin := time.Now()
				kubetest.Start(b, kubetest.Options{Nodes: nodes})
				ds = append(ds, time.Since(begin))
			}
			benchreport.MS(b, benchreport.Median(ds), "ms/start")
		})
	}
}

// BenchmarkThousandJobs: 1,000 Jobs created one after another on 100
// nodes, until all their pods run: the scale of the Kubernetes engine's
// bench, as a floor for what the control plane itself takes.
func BenchmarkThousandJobs(b *testing.B) {
	const jobs = 1000
	c := kubetest.Start(b, kubetest.Options{Nodes: 100})
	for i := 0; b.Loop(); i++ {
		begin := time.Now()
		for j := range jobs {
			if _, err := c.Client.BatchV1().Jobs("default").Create(b.Context(), jobSpec(fmt.Sprintf("r%d-%d", i, j), 0), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		created := time.Since(begin)
		waitfor.Check(b, 10*time.Minute, fmt.Sprintf("%d running pods", jobs), func() error {
			l, err := c.Client.CoreV1().Pods("default").List(b.Context(), metav1.ListOptions{FieldSelector: "status.phase=" + string(corev1.PodRunning)})
			if err != nil {
				return err
			}
			if n := len(l.Items); n < jobs*(i+1) {
				return fmt.Errorf("%d running", n)
			}
			return nil
		})
		benchreport.MS(b, created, "ms/create-1000-jobs")
		benchreport.MS(b, time.Since(begin), "ms/1000-pods-running")
	}
}
