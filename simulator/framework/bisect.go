package framework

// LargestFitting returns the largest n in [lo, hi] for which fits holds,
// by bisection, given that fits(lo) holds and that fits is monotone (a
// count that fits means every smaller one does). hi is tried first: most
// asks are either met whole or not near it.
func LargestFitting(lo, hi int64, fits func(int64) (bool, error)) (int64, error) {
	if hi <= lo {
		return lo, nil
	}
	ok, err := fits(hi)
	if err != nil || ok {
		return hi, err
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := fits(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}
