#!/usr/bin/env bash
# The main job: install what is needed, build, and run a local warmlake that
# `aws s3` can use at once: 6 file-backed drives under ./data, erasure coded
# 4+2, on http://127.0.0.1:9000 (extra arguments go to warmlaked; see
# `build/server/warmlaked --help`). Credentials come from WARMLAKE_ACCESS_KEY /
# WARMLAKE_SECRET_KEY, else a pair is generated once into ./data/credentials.
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"

DATA=./data
mkdir -p "$DATA"
if [ -z "${WARMLAKE_ACCESS_KEY:-}" ] || [ -z "${WARMLAKE_SECRET_KEY:-}" ]; then
  if [ ! -f "$DATA/credentials" ]; then
    ( umask 077
      ak=$(tr -dc 'A-Z0-9' </dev/urandom | head -c 20 || true)
      sk=$(tr -dc 'A-Za-z0-9' </dev/urandom | head -c 40 || true)
      printf 'WARMLAKE_ACCESS_KEY=%s\nWARMLAKE_SECRET_KEY=%s\n' "$ak" "$sk" >"$DATA/credentials" )
  fi
  set -a
  # shellcheck disable=SC1091
  . "$DATA/credentials"
  set +a
fi

printf '\nwarmlake is starting on http://127.0.0.1:9000 (Ctrl-C stops it cleanly).\n'
printf 'In another shell:\n\n'
printf '  export AWS_ACCESS_KEY_ID=%s\n' "$WARMLAKE_ACCESS_KEY"
printf '  export AWS_SECRET_ACCESS_KEY=%s\n' "$WARMLAKE_SECRET_KEY"
printf '  export AWS_DEFAULT_REGION=us-east-1\n'
printf '  aws --endpoint-url http://127.0.0.1:9000 s3 mb s3://demo\n'
printf '  aws --endpoint-url http://127.0.0.1:9000 s3 cp ./README.md s3://demo/\n'
printf '  aws --endpoint-url http://127.0.0.1:9000 s3 ls s3://demo\n\n'
exec build/server/warmlaked --data "$DATA" "$@"
