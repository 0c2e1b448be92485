package framework

import (
	"fmt"
	"os"

	"k8s.io/client-go/informers"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
)

// Options configure a Runner.
type Options struct {
	// FeatureGates are the cluster scheduler's gates, in the
	// --feature-gates format ("GenericWorkload=true,DRAConsumableCapacity=false").
	// They are applied to the process-wide gate before anything copies them.
	FeatureGates string
	// ConfigFile is a KubeSchedulerConfiguration file, kube-scheduler's own
	// --config format. Empty means the default configuration of 1.37.
	ConfigFile string
	// SchedulerName selects the profile; empty selects "default-scheduler",
	// or the only profile when there is one.
	SchedulerName string
	// Informers is a factory over the real cluster: the in-tree plugins
	// read volumes, storage classes, CSI objects, namespaces and the
	// spreading selectors' owners through it, as the scheduler does.
	// StartInformers starts what they asked for. Nil (unit tests): an
	// empty cluster behind the snapshot.
	Informers informers.SharedInformerFactory
}

// ApplyFeatureGates sets the process-wide feature gates from a
// --feature-gates string. The scheduler's defaults, plugin registry,
// framework and our snapshot all copy gate values when they are built, so
// this must run first; New does it.
func ApplyFeatureGates(spec string) error {
	if spec == "" {
		return nil
	}
	// Tried on a copy first: the gate keeps even a rejected spec's keys
	// and fails every later Set, so one bad spec would poison the process
	// (and every test after it).
	if err := utilfeature.DefaultMutableFeatureGate.DeepCopy().Set(spec); err != nil {
		return fmt.Errorf("feature gates %q: %w", spec, err)
	}
	if err := utilfeature.DefaultMutableFeatureGate.Set(spec); err != nil {
		return fmt.Errorf("feature gates %q: %w", spec, err)
	}
	return nil
}

// loadProfile returns the profile to run and the configured parallelism,
// from the file or the defaults, after the scheduler's own validation.
func loadProfile(opts Options) (*config.KubeSchedulerProfile, int, error) {
	var cfg *config.KubeSchedulerConfiguration
	if opts.ConfigFile == "" {
		var err error
		if cfg, err = latest.Default(); err != nil {
			return nil, 0, fmt.Errorf("default scheduler configuration: %w", err)
		}
	} else {
		data, err := os.ReadFile(opts.ConfigFile)
		if err != nil {
			return nil, 0, fmt.Errorf("scheduler configuration: %w", err)
		}
		if cfg, err = decodeConfig(data); err != nil {
			return nil, 0, fmt.Errorf("scheduler configuration %s: %w", opts.ConfigFile, err)
		}
	}
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return nil, 0, fmt.Errorf("scheduler configuration: %w", err)
	}
	profile, err := pickProfile(cfg, opts.SchedulerName)
	return profile, int(cfg.Parallelism), err
}

// decodeConfig decodes and defaults a KubeSchedulerConfiguration as
// kube-scheduler's --config loader does.
func decodeConfig(data []byte) (*config.KubeSchedulerConfiguration, error) {
	obj, gvk, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("not a KubeSchedulerConfiguration but %s", gvk)
	}
	cfg.TypeMeta.APIVersion = gvk.GroupVersion().String()
	return cfg, nil
}

func pickProfile(cfg *config.KubeSchedulerConfiguration, name string) (*config.KubeSchedulerProfile, error) {
	if name == "" && len(cfg.Profiles) == 1 {
		return &cfg.Profiles[0], nil
	}
	if name == "" {
		name = "default-scheduler"
	}
	for i := range cfg.Profiles {
		if cfg.Profiles[i].SchedulerName == name {
			return &cfg.Profiles[i], nil
		}
	}
	return nil, fmt.Errorf("scheduler configuration has no profile %q", name)
}
