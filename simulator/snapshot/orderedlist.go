package snapshot

// orderedList is a list of values keyed by name with O(1) add, remove and
// replace, each exactly undoable (same order after a revert). The framework
// gets the slice itself from the listers, so it never has to be rebuilt
// from a map, and its order is the deterministic insertion order.
type orderedList[T any] struct {
	items []T
	keys  []string
	pos   map[string]int
}

func newOrderedList[T any]() *orderedList[T] {
	return &orderedList[T]{pos: map[string]int{}}
}

// newOrderedListSized has room for n elements.
func newOrderedListSized[T any](n int) *orderedList[T] {
	return &orderedList[T]{items: make([]T, 0, n), keys: make([]string, 0, n), pos: make(map[string]int, n)}
}

func (l *orderedList[T]) has(key string) bool {
	_, ok := l.pos[key]
	return ok
}

// add appends v; the undo drops the last element again.
func (l *orderedList[T]) add(j *journal, key string, v T) {
	l.pos[key] = len(l.items)
	l.items = append(l.items, v)
	l.keys = append(l.keys, key)
	if j.recording() {
		j.record(func() {
			last := len(l.items) - 1
			var zero T
			l.items[last] = zero
			l.items, l.keys = l.items[:last], l.keys[:last]
			delete(l.pos, key)
		})
	}
}

// replace swaps the element keyed key for v in place.
func (l *orderedList[T]) replace(j *journal, key string, v T) {
	i, ok := l.pos[key]
	if !ok {
		return
	}
	old := l.items[i]
	l.items[i] = v
	if j.recording() {
		j.record(func() { l.items[i] = old })
	}
}

// remove moves the last element into the removed one's place. The undo
// appends the removed element and swaps it back, restoring the exact order.
func (l *orderedList[T]) remove(j *journal, key string) {
	i, ok := l.pos[key]
	if !ok {
		return
	}
	removed := l.items[i]
	last := len(l.items) - 1
	movedKey := l.keys[last]
	l.items[i], l.keys[i] = l.items[last], movedKey
	l.pos[movedKey] = i
	var zero T
	l.items[last] = zero
	l.items, l.keys = l.items[:last], l.keys[:last]
	delete(l.pos, key)
	if !j.recording() {
		return
	}
	j.record(func() {
		l.items = append(l.items, removed)
		l.keys = append(l.keys, key)
		end := len(l.items) - 1
		l.items[i], l.items[end] = l.items[end], l.items[i]
		l.keys[i], l.keys[end] = l.keys[end], l.keys[i]
		l.pos[movedKey] = end
		l.pos[key] = i
	})
}

// set adds or replaces.
func (l *orderedList[T]) set(j *journal, key string, v T) {
	if l.has(key) {
		l.replace(j, key, v)
	} else {
		l.add(j, key, v)
	}
}

// sync makes membership of key follow want: set when true, removed if not.
func (l *orderedList[T]) sync(j *journal, key string, v T, want bool) {
	if want {
		l.set(j, key, v)
	} else {
		l.remove(j, key)
	}
}
