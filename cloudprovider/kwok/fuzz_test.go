package kwok

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzParseConfig: any provider config either is refused with an error or
// is a config that survives its own round trip (what it accepted, it
// accepts again once written out).
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("nodeGroups:" + validGroup))
	f.Add([]byte("nodeGroups:\n- {name: g, minSize: 3, maxSize: 2}\n"))
	f.Add([]byte("nodeGroups:\n- {name: g, maxSize: 2, template: {capacity: {cpu: '1e309'}, csiDrivers: [{name: a.b, maxVolumes: -1}]}}\n"))
	f.Add([]byte("nodeGroups:\n- name: g\n  maxSize: 1\n  template:\n    drivers:\n    - driver: gpu.example.com\n      devices: [{name: gpu-0, attributes: {x: {int: 1}}}]\n"))
	f.Add([]byte("reservations:\n- {id: r, kind: capacityBlock, nodeGroups: [g], count: -1, start: '2030-01-01T00:00:00Z', end: '2029-01-01T00:00:00Z'}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			return
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal an accepted config: %v", err)
		}
		if _, err := ParseConfig(out); err != nil {
			t.Fatalf("an accepted config is refused once written out: %v\n%s", err, out)
		}
	})
}
