package config

import "github.com/spf13/pflag"

// CapacityBufferOptions configure the CapacityBuffers the autoscaler
// serves (pkg/buffers).
type CapacityBufferOptions struct {
	// PodDryRun has the API server judge each buffer's pod with a
	// server-side dry-run create in the buffer's namespace: a buffer whose
	// pod admission (quota, PodSecurity, ValidatingAdmissionPolicies,
	// webhooks) rejects holds no capacity.
	PodDryRun bool
}

// DefaultCapacityBufferOptions have the dry run on, as upstream.
func DefaultCapacityBufferOptions() CapacityBufferOptions {
	return CapacityBufferOptions{PodDryRun: true}
}

func (o *CapacityBufferOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.PodDryRun, "capacity-buffer-pod-dry-run-enabled", o.PodDryRun,
		"Judge each CapacityBuffer's pod by the API server's own admission (a server-side dry-run create in the buffer's namespace: "+
			"quota, PodSecurity, ValidatingAdmissionPolicies, webhooks); a buffer whose pod is rejected holds no capacity. "+
			"Needs create on pods; nothing is stored. Off: buffers are held to their namespace's ResourceQuotas only.")
}
