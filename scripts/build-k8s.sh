#!/usr/bin/env bash
# Build, once, the binaries of SkyShift's simulated Kubernetes test bed (skyshift/devstack/sim/k8s.py):
# kube-apiserver, kube-controller-manager and kube-scheduler from the k8s.io/kubernetes Go module
# (through the wrapper module in scripts/k8s-build/, which replaces every staging module by its
# published version), etcd from go.etcd.io/etcd/server/v3 in the same module (Debian's etcd 3.4
# works but makes the apiserver disable RequestWatchProgress, so client-go watch-lists keep failing
# and kwok sees pod changes up to ~10 s late), and the kwok controller from sigs.k8s.io/kwok. Nothing can be downloaded from
# GitHub releases or dl.k8s.io here, so everything comes from the Go module proxy.
#
# Binaries are cached outside git in ${SKYSHIFT_K8S_CACHE:-$HOME/.cache/skyshift/k8s}/<version>/bin;
# a second run checks they exist and report the pinned versions, and exits fast. GOMODCACHE and
# GOCACHE are Go's defaults so module downloads and compiled packages are reused across runs.
# Builds run under `nice -n 19`: the machine is shared with other test runs.
#
# kwok's own stage definitions (node and pod lifecycles) are copied from its module into
# <version>/stages/: the simulator adds stages of its own, and kwok drops every default stage as
# soon as one is configured, so it needs the upstream ones as files.
#
# Progress goes to stderr; the last line on stdout is the bin directory (for scripts and fixtures).
# Usage: scripts/build-k8s.sh [--force]
set -euo pipefail

KUBE_VERSION=v1.35.4   # keep in step with scripts/k8s-build/go.mod
KWOK_VERSION=v0.8.0
ETCD_VERSION=v3.6.5    # what k8s.io/kubernetes $KUBE_VERSION requires (go.etcd.io/etcd/server/v3)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module_dir="$here/k8s-build"
cache_root="${SKYSHIFT_K8S_CACHE:-$HOME/.cache/skyshift/k8s}"
bin_dir="$cache_root/$KUBE_VERSION/bin"
force=0
[ "${1:-}" = "--force" ] && force=1

GO="${GO:-$(command -v go || true)}"
[ -n "$GO" ] || GO=/usr/local/go/bin/go
export GOTOOLCHAIN=local CGO_ENABLED=0

start=$SECONDS
log() { printf '[build-k8s %4ds] %s\n' "$((SECONDS - start))" "$*" >&2; }

kube_ok() {  # the binary exists and is stamped with the pinned version
  [ -x "$bin_dir/$1" ] && [ "$("$bin_dir/$1" --version 2>/dev/null)" = "Kubernetes $KUBE_VERSION" ]
}
# Version checks read a command's whole output into a variable before matching it. Piping it into
# `grep -q` races under `set -o pipefail`: grep exits at the first match, the writer may then get
# SIGPIPE, and the pipeline fails although the binary is fine (5 of 100 checks under load).
kwok_ok() {  # go install records the main module version in the binary's build info
  local info
  [ -x "$bin_dir/kwok" ] && info="$("$GO" version -m "$bin_dir/kwok" 2>/dev/null)" &&
    grep -Eq "^[[:space:]]+mod[[:space:]]+sigs.k8s.io/kwok[[:space:]]+$KWOK_VERSION([[:space:]]|$)" <<<"$info"
}
stages_dir="$cache_root/$KUBE_VERSION/stages"
stage_files=(node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
  pod/fast/pod-ready.yaml pod/fast/pod-delete.yaml pod/general/pod-complete.yaml)
stages_ok() {
  local f
  for f in "${stage_files[@]}"; do [ -s "$stages_dir/$(basename "$f")" ] || return 1; done
}
etcd_ok() {
  local out
  [ -x "$bin_dir/etcd" ] && out="$("$bin_dir/etcd" --version 2>/dev/null)" &&
    grep -qx "etcd Version: ${ETCD_VERSION#v}" <<<"$out"
}
all_ok() {
  etcd_ok && kube_ok kube-apiserver && kube_ok kube-controller-manager && kube_ok kube-scheduler && kwok_ok &&
    stages_ok
}

if [ "$force" = 0 ] && all_ok; then
  log "cached: $bin_dir (kubernetes $KUBE_VERSION, kwok $KWOK_VERSION)"
  echo "$bin_dir"
  exit 0
fi

[ -x "$GO" ] || { echo "build-k8s: no Go toolchain (set GO=/path/to/go)" >&2; exit 2; }
mkdir -p "$bin_dir"
# One build at a time (the test fixture and a developer may both call this).
exec 9>"$cache_root/.build.lock"
if ! flock -n 9; then
  log "another build holds $cache_root/.build.lock; waiting"
  flock 9
  if [ "$force" = 0 ] && all_ok; then log "built by the other run"; echo "$bin_dir"; exit 0; fi
fi
log "go: $("$GO" version); cache: $bin_dir"

minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

cd "$module_dir"
if [ ! -s go.sum ] || ! nice -n 19 "$GO" mod tidy -diff >/dev/null 2>&1; then
  log "resolving modules (go mod tidy; first run downloads ~1 GB into $("$GO" env GOMODCACHE))"
  nice -n 19 "$GO" mod tidy >&2
fi

for name in kube-apiserver kube-controller-manager kube-scheduler; do
  if [ "$force" = 0 ] && kube_ok "$name"; then log "$name: cached"; continue; fi
  t0=$SECONDS
  log "$name: building k8s.io/kubernetes/cmd/$name@$KUBE_VERSION"
  nice -n 19 "$GO" build -trimpath -tags selinux,notest -ldflags "$ldflags" \
    -o "$bin_dir/.$name.tmp" "k8s.io/kubernetes/cmd/$name"
  mv -f "$bin_dir/.$name.tmp" "$bin_dir/$name"
  kube_ok "$name" || { log "$name: built but does not report $KUBE_VERSION"; exit 1; }
  log "$name: done in $((SECONDS - t0))s"
done

if [ "$force" = 0 ] && etcd_ok; then
  log "etcd: cached"
else
  t0=$SECONDS
  log "etcd: building go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  nice -n 19 "$GO" build -trimpath -ldflags "-s -w" -o "$bin_dir/.etcd.tmp" go.etcd.io/etcd/server/v3
  mv -f "$bin_dir/.etcd.tmp" "$bin_dir/etcd"
  etcd_ok || { log "etcd: built but does not report $ETCD_VERSION"; exit 1; }
  log "etcd: done in $((SECONDS - t0))s"
fi

if [ "$force" = 1 ] || ! kwok_ok; then
  t0=$SECONDS
  log "kwok: go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  (cd / && GOBIN="$bin_dir" nice -n 19 "$GO" install -trimpath "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2)
  kwok_ok || { log "kwok: installed but build info does not say $KWOK_VERSION"; exit 1; }
  log "kwok: done in $((SECONDS - t0))s"
else
  log "kwok: cached"
fi

if [ "$force" = 1 ] || ! stages_ok; then
  kwok_json="$(cd / && "$GO" mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION")"
  kwok_src="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$kwok_json")"
  [ -d "$kwok_src/kustomize/stage" ] || { log "kwok: module source not found"; exit 1; }
  mkdir -p "$stages_dir"
  for f in "${stage_files[@]}"; do cp -f "$kwok_src/kustomize/stage/$f" "$stages_dir/"; done
  log "kwok: stages copied to $stages_dir"
fi

log "all built in $((SECONDS - start))s: $bin_dir"
echo "$bin_dir"
