package kwok

import (
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// NodeObjects returns the Node and the ResourceSlices an instance of the
// group named name registers with. Created by hand (a test setting up a
// cluster that already has nodes), they are adopted by the provider on
// its next Refresh like nodes of a previous process.
func NodeObjects(g NodeGroupConfig, name string) (*corev1.Node, []*resourceapi.ResourceSlice) {
	return g.buildNode(name), g.instanceSlices(name)
}
