// Package objorder orders namespaced objects the way the project has
// always ordered them, by the string "namespace/name", without building
// that string: sorting twenty thousand pending pods built it a few
// hundred thousand times.
package objorder

import (
	"cmp"
	"strings"
)

// Compare compares namespace1+"/"+name1 with namespace2+"/"+name2.
func Compare(namespace1, name1, namespace2, name2 string) int {
	if namespace1 == namespace2 {
		return strings.Compare(name1, name2)
	}
	n := min(len(namespace1), len(namespace2))
	if c := strings.Compare(namespace1[:n], namespace2[:n]); c != 0 {
		return c
	}
	// One namespace is a prefix of the other: the shorter one's "/" meets
	// the longer one's next byte. No valid namespace holds a "/"; one that
	// does is compared the long way.
	if len(namespace1) < len(namespace2) {
		if namespace2[n] != '/' {
			return cmp.Compare('/', namespace2[n])
		}
	} else if namespace1[n] != '/' {
		return cmp.Compare(namespace1[n], '/')
	}
	return strings.Compare(namespace1+"/"+name1, namespace2+"/"+name2)
}
