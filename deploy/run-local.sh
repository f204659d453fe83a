#!/usr/bin/env bash
# The main job: install what is needed, build, and run a local warmlake that
# `aws s3` can use at once: 6 file-backed drives under ./data, erasure coded
# 4+2, on http://127.0.0.1:9000 (extra arguments go to warmlaked; see
# `build/server/warmlaked --help`). Credentials come from WARMLAKE_ACCESS_KEY /
# WARMLAKE_SECRET_KEY, else a pair is generated once into ./data/credentials.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # before the cd: the path may be relative
cd "$(dirname "$0")/.."
wl_build .

DATA=./data
mkdir -p "$DATA"
if [ -z "${WARMLAKE_ACCESS_KEY:-}" ] || [ -z "${WARMLAKE_SECRET_KEY:-}" ]; then
  wl_make_credentials "$DATA/credentials"
  wl_load_credentials "$DATA/credentials"
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
