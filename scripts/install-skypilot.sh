#!/usr/bin/env bash
# Install the SkyPilot test bed (docs/skypilot.md): SkyPilot 0.14.1 with its Slurm extra in a
# virtualenv of its own, the unprivileged user SkyPilot runs as and logs in as, and the shims
# that let SkyPilot's node setup work offline against `skyshift sim slurm`.
#
# What it changes on the machine (idempotent: a second run only checks):
#   - Debian packages: rsync (SkyPilot's client uploads with it), python3-venv, curl.
#   - $PREFIX/venv (default /opt/skyshift/skypilot/venv): Debian's python3 + skypilot[slurm] and
#     PyPI's `uv` wheel. Its own venv because skypilot[slurm] pins bcrypt/click/uvicorn/protobuf
#     versions that would downgrade the project's environment. World-readable, owned by root.
#   - $PREFIX/shim/bin: `curl` (answers https://astral.sh/uv/install.sh with an installer that
#     copies the venv's uv) and $PREFIX/shim/uv (uv with `--python 3.10` mapped to Debian's 3.11).
#     Both exist only for this offline test bed.
#   - User $SKY_USER (default skyshift-sky, no password, login shell bash): SkyPilot's client and
#     API server run as it and it is the SSH login user of the simulated login node, so what
#     SkyPilot writes (~/.sky, ~/.slurm, ~/.bashrc, ~/.sky_clusters, authorized_keys) lands in its
#     home. Its ~/.bashrc and ~/.profile get a marked block putting the shims on PATH.
# Debian/Ubuntu only; needs root (user creation).
set -euo pipefail

PREFIX=${SKYSHIFT_SKYPILOT_PREFIX:-/opt/skyshift/skypilot}
SKY_USER=${SKYSHIFT_SKY_USER:-skyshift-sky}
VERSION=0.14.1
SYS_PY=/usr/bin/python3
log() { echo "install-skypilot: $*"; }

if [ "$(id -u)" -ne 0 ]; then
  # creates a user and writes under /opt: re-run as root, keeping the settings above
  exec sudo SKYSHIFT_SKYPILOT_PREFIX="$PREFIX" SKYSHIFT_SKY_USER="$SKY_USER" "$0" "$@"
fi

# ---- Debian packages ------------------------------------------------------------------------
missing=()
for pkg in rsync python3-venv curl; do
  if [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" != "install ok installed" ]; then
    missing+=("$pkg")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]}"
  apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ---- the dedicated user ---------------------------------------------------------------------
if ! id "$SKY_USER" >/dev/null 2>&1; then
  log "creating user $SKY_USER"
  useradd --create-home --shell /bin/bash --user-group "$SKY_USER"
  # '*' = no password, but not locked ('!'): sshd refuses locked accounts even for key logins
  usermod -p '*' "$SKY_USER"
fi
home=$(getent passwd "$SKY_USER" | cut -d: -f6)
chmod 700 "$home"  # SkyPilot keeps its state and keys there

# ---- SkyPilot's own virtualenv --------------------------------------------------------------
venv=$PREFIX/venv
if ! "$venv/bin/python" -c "import sky, sys; sys.exit(sky.__version__ != '$VERSION')" 2>/dev/null \
   || [ ! -x "$venv/bin/uv" ]; then
  log "installing skypilot[slurm]==$VERSION and uv into $venv (~500 MB)"
  mkdir -p "$PREFIX"
  chmod 755 "$PREFIX" "$(dirname "$PREFIX")"
  [ -x "$venv/bin/python" ] || "$SYS_PY" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    "skypilot[slurm]==$VERSION" uv
  chmod -R a+rX "$venv"
fi

# ---- shims (offline test bed only) ----------------------------------------------------------
mkdir -p "$PREFIX/shim/bin"
# uv that maps `--python 3.10` (what SkyPilot's node setup asks for) to Debian's python3.11:
# bookworm has no 3.10 and uv would otherwise download one from the internet.
cat >"$PREFIX/shim/uv" <<EOF
#!/bin/bash
# SkyShift's offline SkyPilot test bed (scripts/install-skypilot.sh): real uv, --python 3.10 -> 3.11
args=()
map=0
for a in "\$@"; do
  if [ "\$map" = 1 ]; then
    [ "\$a" = 3.10 ] && a=$SYS_PY
    map=0
  elif [ "\$a" = --python ] || [ "\$a" = -p ]; then
    map=1
  elif [ "\$a" = --python=3.10 ]; then
    a=--python=$SYS_PY
  fi
  args+=("\$a")
done
exec $venv/bin/uv "\${args[@]}"
EOF
# curl: SkyPilot installs uv with `curl -LsSf https://astral.sh/uv/install.sh | sh`; this answers
# that one URL with an installer copying the uv shim above; every other call is the real curl.
cat >"$PREFIX/shim/bin/curl" <<EOF
#!/bin/bash
# SkyShift's offline SkyPilot test bed (scripts/install-skypilot.sh): serves uv's installer locally
for a in "\$@"; do
  case "\$a" in
    https://astral.sh/uv/install.sh*|https://astral.sh/uv/*/install.sh*)
      cat <<'INSTALLER'
#!/bin/sh
set -e
dest="\${UV_INSTALL_DIR:-\${XDG_BIN_HOME:-\$HOME/.local/bin}}"
mkdir -p "\$dest"
cp $PREFIX/shim/uv "\$dest/uv"
chmod 755 "\$dest/uv"
echo "uv installed to \$dest (SkyShift test bed shim)"
INSTALLER
      exit 0 ;;
  esac
done
exec /usr/bin/curl "\$@"
EOF
chmod 755 "$PREFIX/shim" "$PREFIX/shim/bin" "$PREFIX/shim/uv" "$PREFIX/shim/bin/curl"

# ---- the user's login shell: shims on PATH, the CA bundle -----------------------------------
# SkyPilot runs `bash --login -c`: /etc/profile resets PATH, then ~/.profile sources ~/.bashrc.
begin="# >>> skyshift skypilot test bed >>>"
end="# <<< skyshift skypilot test bed <<<"
block="$begin
export PATH=$PREFIX/shim/bin:\$PATH
export SSL_CERT_FILE=\${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
export SKYPILOT_DISABLE_USAGE_COLLECTION=1
$end"
for rc in .bashrc .profile; do
  f=$home/$rc
  touch "$f"
  # (re)written first in the file: Debian's skeleton .bashrc returns early for non-interactive
  # shells, and an earlier run may have pointed at another prefix (./dev test --fresh)
  { echo "$block"; sed "/^$begin\$/,/^$end\$/d" "$f"; } >"$f.new" && mv "$f.new" "$f"
  chown "$SKY_USER:" "$f"
done
grep -q '\.bashrc' "$home/.profile" || echo '[ -f "$HOME/.bashrc" ] && . "$HOME/.bashrc"' >>"$home/.profile"
log "ready: $venv ($("$venv/bin/python" -c 'import sky; print(sky.__version__)')), user $SKY_USER"
