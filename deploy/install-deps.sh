#!/usr/bin/env bash
# Installs every build, test and bench dependency of warmlake from Debian
# packages. Idempotent: packages already present are left alone, and apt is
# only asked when something is missing (set WL_APT_FORCE=1 to always refresh).
set -euo pipefail

PKGS=(
  # build
  build-essential cmake pkg-config git
  libuv1-dev librocksdb-dev libssl-dev libzstd-dev libisal-dev liburing-dev
  libxxhash-dev libexpat1-dev node-llhttp libinih-dev libjansson-dev libcurl4-openssl-dev
  # tests: unit, sanitizers, fuzzing, integration clients
  libcmocka-dev clang libclang-rt-14-dev clang-format
  python3 python3-pytest python3-pytest-xdist python3-boto3 s3cmd rclone
  restic s3fs  # a backup repository and a FUSE mount on the node (test_backup_and_fuse.py)
  curl  # the README's examples
  # Not Debian's awscli: it brings an old python3-awscrt into dist-packages, which the newest
  # botocore (run with dist-packages on its path, conftest.py) would take up. The aws CLI the
  # tests and run-local.sh's lines use is the one on PATH (test_aws_cli skips without one).
  iproute2     # ip netns, tc: netns-cluster.sh and the network fault tests
  python3-torch python3-numpy  # the warmlake Python package and its PyTorch datasets
  chromium  # CORS seen from a real browser (test_s3_cors.py)
  etcd-server  # the cluster's control plane (test_cluster.py starts its own)
  # ssh hosts in network namespaces for ssh-deploy.sh (test_deploy.py starts its own
  # sshds; the package's ssh service is not used. Where PID 1 is systemd, apt enables
  # and starts it on port 22: `systemctl disable --now ssh` if this machine wants none)
  openssh-server openssh-client
  # bench ceilings
  fio nginx wrk iperf3  # iperf3: the network ceiling of the cluster refill row
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ] && [ "${WL_APT_FORCE:-0}" != 1 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
echo "install-deps: installing ${missing[*]:-(refresh)}"
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${PKGS[@]}"
