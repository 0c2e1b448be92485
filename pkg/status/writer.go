package status

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

// Key is the ConfigMap key holding the status, upstream's.
const Key = "status"

// LastUpdatedAnnotation is upstream's annotation with the write time.
const LastUpdatedAnnotation = "cluster-autoscaler.kubernetes.io/last-updated"

// Writer stores the status ConfigMap. It needs get and update on that
// ConfigMap and create on ConfigMaps in its namespace.
type Writer struct {
	client          kubernetes.Interface
	namespace, name string
	// insecure is stamped on every status written
	// (SetCloudProviderInsecure).
	insecure string
}

// NewWriter returns a writer of namespace/name.
func NewWriter(client kubernetes.Interface, namespace, name string) *Writer {
	return &Writer{client: client, namespace: namespace, name: name}
}

// SetCloudProviderInsecure makes every status written say why the
// provider's connection is insecure: a fact of the configuration, fixed
// at start, not of any one pass.
func (w *Writer) SetCloudProviderInsecure(reason string) { w.insecure = reason }

// Write stores s, creating the ConfigMap when it is missing.
func (w *Writer) Write(ctx context.Context, s *AutoscalerStatus) error {
	if w.insecure != "" {
		stamped := *s
		stamped.CloudProviderInsecure = w.insecure
		s = &stamped
	}
	data, err := yaml.Marshal(s)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	// Another writer (a replica that just lost the lease, a test) may
	// have updated it meanwhile: read again and retry.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return w.write(ctx, s, data) })
}

func (w *Writer) write(ctx context.Context, s *AutoscalerStatus, data []byte) error {
	cms := w.client.CoreV1().ConfigMaps(w.namespace)
	stamp := s.Time.UTC().Format(time.RFC3339)
	cm, err := cms.Get(ctx, w.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.namespace, Name: w.name,
			Annotations: map[string]string{LastUpdatedAnnotation: stamp}}, Data: map[string]string{Key: string(data)}}
		_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Created meanwhile: update it instead, on the retry.
			return apierrors.NewConflict(corev1.Resource("configmaps"), w.name, err)
		}
		if err != nil {
			return fmt.Errorf("create status ConfigMap %s/%s: %w", w.namespace, w.name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get status ConfigMap %s/%s: %w", w.namespace, w.name, err)
	}
	cm = cm.DeepCopy()
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[LastUpdatedAnnotation] = stamp
	cm.Data = map[string]string{Key: string(data)}
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return err // retried as is
	}
	if err != nil {
		return fmt.Errorf("update status ConfigMap %s/%s: %w", w.namespace, w.name, err)
	}
	return nil
}

// Read returns the status stored in namespace/name, for `explain` and
// tests; nil without error when there is none.
func Read(ctx context.Context, client kubernetes.Interface, namespace, name string) (*AutoscalerStatus, error) {
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s AutoscalerStatus
	if err := yaml.Unmarshal([]byte(cm.Data[Key]), &s); err != nil {
		return nil, fmt.Errorf("status ConfigMap %s/%s: %w", namespace, name, err)
	}
	return &s, nil
}
