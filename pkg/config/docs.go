package config

import "github.com/spf13/pflag"

// FlagSet returns the autoscaler's flags with their defaults, without
// klog's, for generated documentation (docs/flags.md).
func FlagSet() *pflag.FlagSet {
	o := Default()
	fs := pflag.NewFlagSet("dra-autoscaler", pflag.ContinueOnError)
	o.addFlags(fs)
	return fs
}
