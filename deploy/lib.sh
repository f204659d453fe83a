# shellcheck shell=bash
# What the deploy scripts share: sourced, never run, by each of them from its
# own directory (so it is found whatever the current directory):
#
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# These were the same lines copied into every script (the secret and key
# generation into five, already drifting apart: `-f` in some, `-s` in
# others, a chmod after in two); here there is one of each.
# Sourcing it defines functions and nothing else: no option, no trap, no
# variable (every script has its own `set -euo pipefail` and EXIT trap). A
# function that fails says why on stderr and returns non-zero; it never
# exits, so the caller's `set -e` or `|| die` decides.
#
#   wl_make_secret FILE       the cluster secret: 48 random A-Za-z0-9, no newline
#   wl_make_credentials FILE  an S3 key pair: WARMLAKE_ACCESS_KEY (20 of A-Z0-9)
#                             and WARMLAKE_SECRET_KEY (40 of A-Za-z0-9), one a line
#       Both keep FILE when it is there and not empty (run again, a cluster
#       keeps its secret and keys), else write it mode 0600 from its creation
#       (never readable by others, not even between a write and a chmod) and
#       atomically (a temp file beside it, fsync'd, renamed over it): a crash
#       leaves the old state or the whole file, never half a secret. An empty
#       FILE (as a crash before the rename's data reached the disk can leave)
#       counts as missing. Not for two runs at once on one FILE: the last
#       rename would win.
#   wl_load_credentials FILE  sources FILE with every assignment exported
#                             (WARMLAKE_ACCESS_KEY, WARMLAKE_SECRET_KEY)
#   wl_print_aws_howto E1 EN  the `export AWS_...` line for those keys and the
#                             `aws` lines that try the cluster (write through E1,
#                             list through EN), indented two spaces
#   wl_wait_ready LOG PID DEADLINE [OFFSET]
#       until warmlaked's "ready port=" line is in LOG (from byte OFFSET on),
#       polling every 0.1 s: 0 once it is; 1 when PID exits first; 2 when
#       $SECONDS reaches DEADLINE first. The caller says what that means.
#   wl_build ROOT             installs the build dependencies and builds
#                             ROOT/build (Release), for the scripts that build
#                             when WL_BUILD names no build

wl_random() { # wl_random SET LEN: LEN random characters of the tr(1) SET, no newline
  local out
  # tr gets SIGPIPE once head has enough: under pipefail that is a failure, hence
  # the || true, and the length is what says whether it worked.
  out=$(LC_ALL=C tr -dc "$1" </dev/urandom | head -c "$2") || true
  if [ "${#out}" != "$2" ]; then
    echo "wl_random: could not read $2 random characters from /dev/urandom" >&2
    return 1
  fi
  printf '%s' "$out"
}

wl_write_private() { # wl_write_private FILE: stdin into FILE, 0600 from the start, atomically
  local file=$1 tmp
  # mktemp creates it 0600 whatever the umask, in FILE's directory (the rename
  # must not cross file systems).
  tmp=$(mktemp "$file.tmp.XXXXXX") || return 1
  if cat >"$tmp" && sync -- "$tmp" && mv -f -- "$tmp" "$file"; then return 0; fi
  echo "wl_write_private: could not write $file" >&2
  rm -f -- "$tmp"
  return 1
}

wl_make_secret() { # wl_make_secret FILE
  [ -s "$1" ] && return 0
  local s
  s=$(wl_random 'A-Za-z0-9' 48) || return 1
  printf '%s' "$s" | wl_write_private "$1"
}

wl_make_credentials() { # wl_make_credentials FILE
  [ -s "$1" ] && return 0
  local ak sk
  ak=$(wl_random 'A-Z0-9' 20) || return 1
  sk=$(wl_random 'A-Za-z0-9' 40) || return 1
  printf 'WARMLAKE_ACCESS_KEY=%s\nWARMLAKE_SECRET_KEY=%s\n' "$ak" "$sk" | wl_write_private "$1"
}

wl_load_credentials() { # wl_load_credentials FILE
  set -a
  # shellcheck disable=SC1090
  . "$1"
  set +a
}

wl_print_aws_howto() { # wl_print_aws_howto E1 EN (WARMLAKE_ACCESS_KEY, WARMLAKE_SECRET_KEY set)
  printf '  export AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s AWS_DEFAULT_REGION=us-east-1\n' \
    "$WARMLAKE_ACCESS_KEY" "$WARMLAKE_SECRET_KEY"
  printf '  aws --endpoint-url %s s3 mb s3://demo\n' "$1"
  printf '  aws --endpoint-url %s s3 cp ./README.md s3://demo/\n' "$1"
  printf '  aws --endpoint-url %s s3 ls s3://demo\n' "$2"
}

wl_alive() { # wl_alive PID: it runs (a zombie, exited but not yet reaped, does not)
  [[ ${1:-} =~ ^[0-9]+$ ]] && [ -d "/proc/$1" ] &&
    [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

wl_wait_ready() { # wl_wait_ready LOG PID DEADLINE [OFFSET]
  local log=$1 pid=$2 deadline=$3 off=${4:-0}
  while :; do
    # grep without -q reads to the end: tail never dies of SIGPIPE (pipefail).
    tail -c "+$((off + 1))" "$log" 2>/dev/null | grep -F "ready port=" >/dev/null && return 0
    wl_alive "$pid" || return 1
    [ "$SECONDS" -lt "$deadline" ] || return 2
    sleep 0.1
  done
}

wl_build() { # wl_build ROOT
  ( cd "$1" &&
    deploy/install-deps.sh &&
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build build -j"$(nproc)" )
}
