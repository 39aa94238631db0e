#!/usr/bin/env bash
# Build, once, the Temporal server (not the dev server of the `temporal` CLI) from its Go module
# go.temporal.io/server: the production topology (docs/production.md) runs it against a SQL store.
# Nothing can be downloaded from GitHub releases here, the Go module proxy serves the source.
#
# Cached outside git in ${SKYSHIFT_TEMPORAL_CACHE:-$HOME/.cache/skyshift/temporal}/<version>/bin/
# temporal-server; a second run checks the binary's build info and exits fast
# (scripts/lib/go-install.sh). The first build compiles ~2,000 packages.
#
# The server's go.mod needs a newer Go than Debian's or /usr/local/go's: GOTOOLCHAIN names the
# toolchain, which Go fetches from the module proxy (as a module) once and keeps in the module
# cache. -mod=mod as Go's own `go install` of this module is built elsewhere on the machine, so
# both share compiled packages in GOCACHE.
# The last line on stdout is the bin directory. Usage: scripts/build-temporal.sh [--force]
set -euo pipefail

TEMPORAL_VERSION=v1.32.2  # its go.mod needs Go >= 1.26.10
TEMPORAL_TOOLCHAIN=go1.27.3

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/go-install.sh
. "$here/lib/go-install.sh"
export GOTOOLCHAIN="$TEMPORAL_TOOLCHAIN" GOFLAGS="-mod=mod"
go_install_cached temporal-server go.temporal.io/server/cmd/server go.temporal.io/server \
  "$TEMPORAL_VERSION" "${SKYSHIFT_TEMPORAL_CACHE:-$HOME/.cache/skyshift/temporal}" "${1:-}"
