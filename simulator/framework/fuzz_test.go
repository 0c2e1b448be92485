package framework

import "testing"

// FuzzSchedulerConfig: a --scheduler-config-file is decoded into a
// configuration and a profile, or refused with an error; never a panic.
func FuzzSchedulerConfig(f *testing.F) {
	for _, s := range []string{
		"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      disabled:\n      - name: TaintToleration\n",
		"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: -3\nprofiles: []\n",
		"apiVersion: v1\nkind: Pod\n",
		"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: x\n  pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: Nope}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := decodeConfig(data)
		if err != nil {
			return
		}
		_, _ = pickProfile(cfg, "default-scheduler")
	})
}
