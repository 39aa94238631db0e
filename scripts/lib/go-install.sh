#!/usr/bin/env bash
# Sourced by scripts/build-temporal.sh and scripts/build-helm.sh: `go install` one command of a Go
# module, at a pinned version, into a cache directory outside git, once.
#
# go_install_cached NAME PACKAGE MODULE VERSION CACHE_ROOT [--force]
#   Installs PACKAGE@VERSION as CACHE_ROOT/VERSION/bin/NAME. A second call checks that the binary's
#   build info (`go version -m`) names MODULE at VERSION and returns at once. GOMODCACHE and GOCACHE
#   are Go's defaults, so module downloads and compiled packages are shared with every other Go
#   build on the machine (a `go install` of the same package with the same toolchain and flags
#   leaves almost nothing to compile). Builds run under `nice -n 19`: the machine is shared.
#   The toolchain is $GOTOOLCHAIN as the caller exported it (local by default).
#   Progress goes to stderr; the last line on stdout is the bin directory.

GO="${GO:-$(command -v go || true)}"
[ -n "$GO" ] || GO=/usr/local/go/bin/go

go_install_cached() {
  local name=$1 package=$2 module=$3 version=$4 cache_root=$5 force=0
  [ "${6:-}" = "--force" ] && force=1
  local bin_dir="$cache_root/$version/bin" start=$SECONDS
  log() { printf '[build-%s %4ds] %s\n' "$name" "$((SECONDS - start))" "$*" >&2; }
  # Read the whole build info before matching (a `| grep -q` pipeline races under pipefail).
  built_ok() {
    local info
    [ -x "$bin_dir/$name" ] && info="$("$GO" version -m "$bin_dir/$name" 2>/dev/null)" &&
      grep -Eq "^[[:space:]]+mod[[:space:]]+$module[[:space:]]+$version([[:space:]]|$)" <<<"$info"
  }
  if [ "$force" = 0 ] && built_ok; then
    log "cached: $bin_dir/$name ($module $version)"
    echo "$bin_dir"
    return 0
  fi
  [ -x "$GO" ] || { echo "build-$name: no Go toolchain (set GO=/path/to/go)" >&2; return 2; }
  mkdir -p "$bin_dir"
  # One build at a time (the test fixture and a developer may both call this). The lock is held
  # in a subshell, so it is released when this build ends: a caller that builds two binaries
  # into one cache (build-temporal.sh) must not wait for its own first build's lock.
  (
    exec 9>"$cache_root/.build.lock"
    if ! flock -n 9; then
      log "another build holds $cache_root/.build.lock; waiting"
      flock 9
      if [ "$force" = 0 ] && built_ok; then log "built by the other run"; exit 0; fi
    fi
    log "go install $package@$version (toolchain ${GOTOOLCHAIN:-local}; $("$GO" version))"
    tmp="$bin_dir/.install"
    rm -rf "$tmp" && mkdir -p "$tmp"
    (cd / && GOBIN="$tmp" nice -n 19 "$GO" install "$package@$version" >&2)
    mv -f "$tmp/$(basename "$package")" "$bin_dir/$name"
    rm -rf "$tmp"
    built_ok || { log "installed, but its build info does not say $module $version"; exit 1; }
    log "done in $((SECONDS - start))s: $bin_dir/$name"
  ) || return $?
  echo "$bin_dir"
}
