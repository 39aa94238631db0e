#!/usr/bin/env bash
# Build, once, the Temporal server (not the dev server of the `temporal` CLI) from its Go module
# go.temporal.io/server: the production topology (docs/production.md) runs it against a SQL store.
# Nothing can be downloaded from GitHub releases here, the Go module proxy serves the source.
#
# Cached outside git in ${SKYSHIFT_TEMPORAL_CACHE:-$HOME/.cache/skyshift/temporal}/<version>/bin/
# temporal-server (and temporal-sql-tool); a second run checks the binary's build info and exits fast
# (scripts/lib/go-install.sh). The first build compiles ~2,000 packages.
# Also Temporal's standalone Web UI server, github.com/temporalio/ui-server/v2 (the UI's built pages
# are embedded in its module), cached as <ui version>/bin/temporal-ui-server in the same cache and
# linked beside temporal-server, so the printed bin directory holds all three.
#
# The server's go.mod needs a newer Go than Debian's or /usr/local/go's: GOTOOLCHAIN names the
# toolchain, which Go fetches from the module proxy (as a module) once and keeps in the module
# cache. -mod=mod as Go's own `go install` of this module is built elsewhere on the machine, so
# both share compiled packages in GOCACHE.
# The last line on stdout is the bin directory. Usage: scripts/build-temporal.sh [--force]
set -euo pipefail

TEMPORAL_VERSION=v1.32.2  # its go.mod needs Go >= 1.26.10
TEMPORAL_TOOLCHAIN=go1.27.3
UI_SERVER_VERSION=v2.55.0  # v2.56.2 on need echo v4.16.1, v2.58 go.temporal.io/api v1.64.0: not on the proxy

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/go-install.sh
. "$here/lib/go-install.sh"
export GOTOOLCHAIN="$TEMPORAL_TOOLCHAIN" GOFLAGS="-mod=mod"
cache="${SKYSHIFT_TEMPORAL_CACHE:-$HOME/.cache/skyshift/temporal}"
go_install_cached temporal-server go.temporal.io/server/cmd/server go.temporal.io/server \
  "$TEMPORAL_VERSION" "$cache" "${1:-}" >/dev/null
# temporal-sql-tool creates and migrates the schema of a SQL store (PostgreSQL, MySQL); it shares
# nearly every package with the server.
bin_dir="$(go_install_cached temporal-sql-tool go.temporal.io/server/cmd/tools/sql \
  go.temporal.io/server "$TEMPORAL_VERSION" "$cache" "${1:-}")"
# The PostgreSQL schema (its versioned migrations) beside the binaries: <version>/schema/postgresql.
schema_dir="$cache/$TEMPORAL_VERSION/schema"
if [ ! -d "$schema_dir/postgresql/v12/temporal/versioned" ]; then
  module_json="$(cd / && "$GO" mod download -json "go.temporal.io/server@$TEMPORAL_VERSION")"
  module_src="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$module_json")"
  [ -d "$module_src/schema/postgresql" ] || { echo "build-temporal: schema not found" >&2; exit 1; }
  mkdir -p "$schema_dir" && cp -r "$module_src/schema/postgresql" "$schema_dir/"
  chmod -R u+w "$schema_dir"  # the module cache is read-only
fi
ui_dir="$(go_install_cached temporal-ui-server github.com/temporalio/ui-server/v2/cmd/server \
  github.com/temporalio/ui-server/v2 "$UI_SERVER_VERSION" "$cache" "${1:-}")"
ln -sfn "$ui_dir/temporal-ui-server" "$bin_dir/temporal-ui-server"
echo "$bin_dir"
