#!/bin/sh
# Builds and runs upstream cluster-autoscaler's own RunOnce benchmarks
# (sigs.k8s.io/cluster-autoscaler, pkg/core/bench) in a module context of
# their own, for docs/performance.md's side-by-side numbers (issue 39).
#
# The module proxy serves neither sigs.k8s.io/cluster-autoscaler nor
# k8s.io/autoscaler/cluster-autoscaler/apis, and two of the benchmark's
# pins (k8s.io/kubernetes v1.37.0-rc.0 and the staging modules at
# v0.37.0-rc.0) either, so the sources come from checkouts and the pins
# move to v1.37.0 / v0.37.0:
#
#   hack/upstream/bench.sh CA_CHECKOUT AUTOSCALER_CHECKOUT [bench regex] [count]
#
# CA_CHECKOUT: a git checkout of kubernetes-sigs/cluster-autoscaler;
# AUTOSCALER_CHECKOUT: one of kubernetes/autoscaler holding the commit
# the first's go.mod names for cluster-autoscaler/apis. Nothing is written
# into either: both are exported to a work directory ($WORK, default
# /tmp/upstream-bench). The root go.mod is not touched.
set -eu
ca=$1 as=$2 re=${3:-'^BenchmarkRunOnceScaleDownDRA$'} count=${4:-3}
work=${WORK:-/tmp/upstream-bench}
rm -rf "$work" && mkdir -p "$work/ca" "$work/as"
git -C "$ca" archive HEAD | tar -x -C "$work/ca"
apis=$(sed -n 's|^[[:space:]]*k8s.io/autoscaler/cluster-autoscaler/apis v0.0.0-[0-9]*-\([0-9a-f]*\)$|\1|p' "$work/ca/go.mod")
[ -n "$apis" ] || { echo "no cluster-autoscaler/apis pin in $ca/go.mod" >&2; exit 1; }
git -C "$as" archive "$apis" cluster-autoscaler/apis | tar -x -C "$work/as"
echo "cluster-autoscaler $(git -C "$ca" rev-parse HEAD), apis from kubernetes/autoscaler $apis" >&2
cd "$work/ca"
sed -i 's/v0\.37\.0-rc\.0/v0.37.0/g; s|k8s.io/kubernetes v1\.37\.0-rc\.0|k8s.io/kubernetes v1.37.0|' go.mod
printf '\nreplace k8s.io/autoscaler/cluster-autoscaler/apis => %s/as/cluster-autoscaler/apis\n' "$work" >> go.mod
export GOFLAGS=-mod=mod GOSUMDB=off CGO_ENABLED=0
go test -trimpath -c -o "$work/bench.test" ./pkg/core/bench/
cd "$work"
for i in $(seq 1 "$count"); do
  /usr/bin/time -f "peak RSS %M KB" ./bench.test -test.run '^$' -test.bench "$re" -test.benchtime 1x -test.benchmem
done
