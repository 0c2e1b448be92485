package fitexisting

// The package's tests check each scan started from a class's last one
// against a full walk, and each pod found early to fit nowhere against the
// scans that finding skips.
func init() { verifyScans = true }
