package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseFence keeps a replica that lost the leader lease from writing. A
// leader frozen for longer than the lease (a paused VM, a long GC stop, a
// SIGSTOP) resumes believing it leads until its renew loop gives up; in
// that window the next leader already acts. The fence knows when this
// process last wrote the lease, and once that is older than the renew
// deadline (client-go's own bound, shorter than the lease) it holds every
// write of the autoscaler's API clients and tells the safety gate, which
// holds the provider calls. The lease is written through a client of its
// own, outside the fence.
type leaseFence struct {
	// renewDeadline is 0 without leader election: always held.
	renewDeadline time.Duration
	// renewed is when this process last wrote the lease (Unix nanoseconds,
	// taken before the write: the lease runs from no earlier than that).
	renewed atomic.Int64
}

func newLeaseFence(elect bool, renewDeadline time.Duration) *leaseFence {
	f := &leaseFence{}
	if elect {
		f.renewDeadline = renewDeadline
	}
	return f
}

// Held tells whether this process holds the lease as far as it can know.
func (f *leaseFence) Held() bool {
	if f.renewDeadline == 0 {
		return true
	}
	at := f.renewed.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < f.renewDeadline
}

// lock stamps each successful write of the lease.
func (f *leaseFence) lock(l resourcelock.Interface) resourcelock.Interface {
	return &fencedLock{Interface: l, f: f}
}

type fencedLock struct {
	resourcelock.Interface
	f *leaseFence
	// holder is who held the lease when it was last read.
	holder atomic.Pointer[string]
}

func (l *fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r, raw, err := l.Interface.Get(ctx)
	if err == nil && r != nil {
		h := r.HolderIdentity
		l.holder.Store(&h)
	}
	return r, raw, err
}

func (l *fencedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	at := time.Now()
	err := l.Interface.Create(ctx, r)
	l.stamp(err, r, at)
	return err
}

func (l *fencedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	// client-go's release on cancel (an empty holder) judges by the holder
	// it last observed, not by the lease it has just read: after losing
	// the lease it would write over the new leader's, and against a
	// conflict it retries without end (tryRelease recurses). Another
	// replica's lease is not ours to release.
	if h := l.holder.Load(); r.HolderIdentity == "" && h != nil && *h != "" && *h != l.Identity() {
		return fmt.Errorf("%w: %s holds it now", errNotReleasing, *h)
	}
	at := time.Now()
	err := l.Interface.Update(ctx, r)
	l.stamp(err, r, at)
	return err
}

func (l *fencedLock) stamp(err error, r resourcelock.LeaderElectionRecord, at time.Time) {
	switch {
	case err != nil:
	case r.HolderIdentity == l.Identity():
		l.f.renewed.Store(at.UnixNano())
	default:
		// Released (ReleaseOnCancel writes an empty holder).
		l.f.renewed.Store(0)
	}
}

// errNotLeading refuses the writes of a replica that lost the lease.
var errNotLeading = errors.New("this replica does not hold the leader lease")

// errNotReleasing refuses to release a lease another replica holds.
var errNotReleasing = errors.New("not releasing the leader lease")

// wrap is a transport that refuses every write while the lease is not
// held; reads pass.
func (f *leaseFence) wrap(rt http.RoundTripper) http.RoundTripper {
	return writesIf(rt, func() error {
		if f.Held() {
			return nil
		}
		return errNotLeading
	})
}
