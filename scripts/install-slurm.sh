#!/usr/bin/env bash
# Install what the simulated Slurm test bed (skyshift/devstack/sim/slurm.py) and the Slurm adapter
# tests need: slurmctld, slurmd, the client commands, munge, and openssh (client for the adapter's
# SSH path, server for the test that starts a private sshd). Idempotent: installs only what is
# missing, so CI can call it on every run. Debian/Ubuntu (apt) only; needs root or sudo.
set -euo pipefail

packages=(slurmctld slurmd slurm-client munge openssh-client openssh-server)
missing=()
for pkg in "${packages[@]}"; do
  # No `| grep -q` under pipefail: grep may exit before the writer is done and SIGPIPE fails the check.
  if [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" != "install ok installed" ]; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-slurm: all present (${packages[*]})"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

echo "install-slurm: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Package scripts try to start services; there is no init system in containers and the test bed
# starts its own daemons, so forbid service starts during the install.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod +x "$policy"
  created_policy=1
fi
trap '[ "$created_policy" = 1 ] && $SUDO rm -f "$policy"' EXIT

$SUDO apt-get update -qq || true
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-slurm: done"
