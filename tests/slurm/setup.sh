#!/usr/bin/env bash
# Install what tests/test_slurm.py needs: Debian's Slurm (slurmctld, slurmd, sbatch, ...) and MUNGE, its
# authentication daemon. Run once as root on a Debian/Ubuntu machine; the test itself configures, starts and
# stops its own slurmctld, slurmd and munged on 127.0.0.1 (tests/slurm/cluster.py), nothing system-wide.
#
#   bash tests/slurm/setup.sh
set -euo pipefail
if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
    && command -v munged >/dev/null; then
  echo "slurm: $(slurmctld -V) and munge already installed"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "error: installing slurm-wlm needs root (apt-get); run: sudo bash $0" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# slurm-wlm pulls slurmctld, slurmd and the client commands; munge is their authentication
apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
echo "slurm: $(slurmctld -V) installed"
