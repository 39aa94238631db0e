#!/usr/bin/env bash
# Build, once, the helm CLI that checks SkyShift's chart (deploy/helm/skyshift,
# tests/integration/test_helm_chart.py) from its Go module helm.sh/helm/v3: nothing can be
# downloaded from GitHub releases here, the Go module proxy serves the source.
#
# Cached outside git in ${SKYSHIFT_HELM_CACHE:-$HOME/.cache/skyshift/helm}/<version>/bin/helm; a
# second run checks the binary's build info and exits fast (scripts/lib/go-install.sh).
# The last line on stdout is the bin directory. Usage: scripts/build-helm.sh [--force]
set -euo pipefail

HELM_VERSION=v3.22.0  # its go.mod needs Go >= 1.26.0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/go-install.sh
. "$here/lib/go-install.sh"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
go_install_cached helm helm.sh/helm/v3/cmd/helm helm.sh/helm/v3 "$HELM_VERSION" \
  "${SKYSHIFT_HELM_CACHE:-$HOME/.cache/skyshift/helm}" "${1:-}"
