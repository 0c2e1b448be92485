package framework

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Namespace gives a test its own namespace (deleted at the end) and a
// context bounded by the test's deadline. Cluster-scoped objects a test
// creates should carry the namespace name, so parallel tests never collide.
func (c *Cluster) Namespace(t *testing.T) (context.Context, string) {
	t.Helper()
	return c.NamespaceWithin(t, 5*time.Minute)
}

// NamespaceWithin is Namespace for a test that may take longer than the
// usual 5 minutes.
func (c *Cluster) NamespaceWithin(t *testing.T, d time.Duration) (context.Context, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	name := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.Trim(name, "-") + "-" + rand.String(5)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	// The ServiceAccount admission plugin rejects pods until the namespace
	// has its default ServiceAccount; create it rather than wait for the
	// controller.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: name}}
	if _, err := c.Client.CoreV1().ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the default ServiceAccount in %s: %v", name, err)
	}
	t.Cleanup(func() {
		// Best effort: the control plane goes away at the end of the run anyway.
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return ctx, name
}
