// Package priority prefers node groups by user-given priorities, read from
// a ConfigMap in the upstream cluster autoscaler's format:
//
//	data:
//	  priorities: |
//	    50:
//	      - gpu-reserved.*
//	    10:
//	      - .*
//
// Higher numbers win; a group matching no pattern has the lowest priority.
package priority

import (
	"fmt"
	"regexp"

	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
)

// Name is the --expander value.
const Name = "priority"

// ConfigKey is the ConfigMap key holding the priorities.
const ConfigKey = "priorities"

// ConfigSource returns the ConfigMap's data; found is false when it does not exist.
type ConfigSource func() (data map[string]string, found bool, err error)

type strategy struct {
	source ConfigSource
	warn   func(error)
}

// New returns the strategy reading its priorities from source each time.
// warn, if set, is told when the config is unusable (the owner of the
// ConfigMap should hear it, not only the log).
func New(source ConfigSource, warn func(error)) expander.Strategy {
	return strategy{source: source, warn: warn}
}

func (strategy) Name() string { return Name }

func (s strategy) Best(options []expander.Option) []expander.Option {
	prios, err := s.load()
	if err != nil {
		// A broken ConfigMap must not stop scale-ups: the next expander
		// in the chain decides, and the user sees why in the log.
		klog.ErrorS(err, "Priority expander config unusable; ignoring priorities")
		if s.warn != nil {
			s.warn(err)
		}
		return options
	}
	return expander.BestBy(options, func(o expander.Option) float64 {
		best := -1 << 62
		for _, p := range prios {
			if p.priority > best && p.pattern.MatchString(o.NodeGroup) {
				best = p.priority
			}
		}
		return -float64(best)
	})
}

type entry struct {
	priority int
	pattern  *regexp.Regexp
}

func (s strategy) load() ([]entry, error) {
	data, found, err := s.source()
	if err != nil || !found {
		return nil, err
	}
	return parse(data[ConfigKey])
}

// parse reads the priorities document; patterns match whole group names.
func parse(doc string) ([]entry, error) {
	var raw map[int][]string
	if err := yaml.UnmarshalStrict([]byte(doc), &raw); err != nil {
		return nil, fmt.Errorf("priorities: %w", err)
	}
	var out []entry
	for prio, patterns := range raw {
		for _, p := range patterns {
			re, err := regexp.Compile("^(?:" + p + ")$")
			if err != nil {
				return nil, fmt.Errorf("priorities: priority %d: pattern %q: %w", prio, p, err)
			}
			out = append(out, entry{priority: prio, pattern: re})
		}
	}
	return out, nil
}
