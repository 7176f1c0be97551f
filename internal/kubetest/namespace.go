package kubetest

import (
	"fmt"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StorageClass is the class of the volumes Namespace makes.
const StorageClass = "legion-test"

// Namespace makes namespace ns with volumes pre-made volumes of 1Gi in
// StorageClass (a cluster without a provisioner: the persistent volume
// controller binds each issue's claim to one of them), as a cluster
// operator would.
func (c *Cluster) Namespace(t testing.TB, ns string, volumes int) {
	t.Helper()
	ctx := t.Context()
	c.namespaceAndClass(t, ns)
	for i := range volumes {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-pv-%d", ns, i)},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName: StorageClass,
				Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: filepath.Join("/srv/legion-test", ns, fmt.Sprint(i))}},
			},
		}
		if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// namespaceAndClass makes namespace ns and, once per cluster,
// StorageClass without a provisioner (Immediate binding to pre-made
// volumes).
func (c *Cluster) namespaceAndClass(t testing.TB, ns string) {
	t.Helper()
	ctx := t.Context()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	immediate := storagev1.VolumeBindingImmediate
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: StorageClass}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &immediate,
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
