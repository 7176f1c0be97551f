package config

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

var bigExponent = regexp.MustCompile(`[eE][+-]?[0-9]{3}`)

var leadingNumber = regexp.MustCompile(`^\+?([0-9]|\.[0-9])`)

// The checks of kubernetes.* quantities and namespaces take what
// Kubernetes takes (positive quantities only).
func FuzzQuantityLikeKubernetes(f *testing.F) {
	for _, s := range []string{"500m", "2", "10Gi", "1.5", ".5", "5.", "1e3", "1E-3", "2 GB", "1Gb", "-1", "+1", "1Ki", "0x10", "", "1.2.3", "1e", "Gi"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ours := quantityRE.MatchString(s)
		if bigExponent.MatchString(s) {
			// Kubernetes's parser takes seconds on such exponents; ours
			// refuses more than two digits.
			if ours {
				t.Errorf("%q: an exponent of more than two digits accepted", s)
			}
			return
		}
		_, kerr := resource.ParseQuantity(s)
		if strings.HasPrefix(s, "-") {
			if ours {
				t.Errorf("%q: a negative quantity accepted", s)
			}
			return
		}
		// Ours never takes what Kubernetes refuses; it refuses what has no
		// digit before its suffix, which Kubernetes reads as 0.
		if ours && kerr != nil || !ours && kerr == nil && leadingNumber.MatchString(s) {
			t.Errorf("%q: ours %v, Kubernetes's err %v", s, ours, kerr)
		}
	})
}

func FuzzNamespaceLikeKubernetes(f *testing.F) {
	for _, s := range []string{"demo", "Demo", "a-b", "-a", "a-", strings.Repeat("a", 64), "a.b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ours, theirs := dnsLabel(s), len(validation.IsDNS1123Label(s)) == 0; ours != theirs {
			t.Errorf("%q: ours %v, Kubernetes's %v", s, ours, theirs)
		}
	})
}
