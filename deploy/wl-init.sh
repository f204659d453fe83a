#!/bin/sh
# Starts and stops warmlake's daemons on a host without systemd (a container,
# or any host whose PID 1 is not systemd): installed as BIN_DIR/wl-init by
# `deploy/ssh-deploy.sh --init none`, which writes its paths and users into
# the settings below as it writes them into the systemd unit for --init
# systemd. Run as root.
#
#   wl-init start NAME...     start each unless it runs, and go on (a node is
#                             ready once it has met its peers, or given up on
#                             them: start every node, then wait)
#   wl-init wait NAME...      until each node is ready since its last start (its
#                             "ready port=" log line), up to WL_INIT_WAIT seconds
#                             (default 60) each; fails when one is not running
#   wl-init stop NAME...      SIGTERM, up to 120 s for a node (a clean stop
#                             flushes every drive) and 30 s for etcd, then SIGKILL
#   wl-init restart NAME...   stop, start and, for a node, wait, one after the
#                             other (a rolling restart); one not running: start
#   wl-init status [NAME...]  running (pid) or stopped; exit 3 when one is stopped.
#                             Without NAME: every node with an env file here, and
#                             etcd where it has one
#
# NAME: a node id (its settings in ETC/ID.env, as the unit reads them), or
# etcd (ETC/etcd.env: ETCD_* variables, which etcd reads from its
# environment). What systemd does for the unit, done here:
#   - a clean environment: PATH, then ETC/credentials and the env file, each
#     KEY=VALUE line as it stands (as systemd's EnvironmentFile, unquoted);
#   - its own session (setsid), stdin /dev/null, stdout and stderr appended
#     to LOGS/NAME.log (append: copytruncate rotation works);
#   - RUN/NAME.pid written by the process itself before it becomes the daemon
#     (exec): the pid is the daemon's, never a wrapper's;
#   - the node as RUN_USER and etcd as ETCD_USER (setpriv, with no new
#     privileges), the open-file limit raised as the unit's LimitNOFILE;
#   - a pid counts as ours only while /proc/PID/exe is the daemon's binary
#     (a pid reused by something else is never signalled); a binary replaced
#     under a running daemon shows as "BINARY (deleted)" and still counts.
# Not done: restart on failure, start at boot. Run `wl-init start` from the
# container's entrypoint or a supervisor for those.
set -eu

# Written by ssh-deploy.sh (--etc-dir, --bin-dir, --data-root, --log-dir,
# --run-user); one line each, matched by name.
ETC=/etc/warmlake
BIN=/usr/local/bin
DATA=/var/lib/warmlake
LOGS=/var/log/warmlake
RUN_USER=warmlake
ETCD_USER=etcd
RUN=/run/warmlake

WAIT=${WL_INIT_WAIT:-60}
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

say() { echo "wl-init: $*"; }
die() { echo "wl-init: $*" >&2; exit 1; }

exe_of() { # NAME: the daemon's binary, resolved
  if [ "$1" = etcd ]; then
    readlink -f "$(command -v etcd || echo /usr/bin/etcd)"
  else
    readlink -f "$BIN/warmlaked"
  fi
}

pid_of() { # NAME: its pid when the pid file names a live process of its binary, else nothing
  f=$RUN/$1.pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f" 2>/dev/null) || return 0
  case $pid in '' | *[!0-9]*) return 0 ;; esac
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 0
  [ "${exe% (deleted)}" = "$(exe_of "$1")" ] || return 0
  # A zombie (exited, not yet reaped by PID 1) has stopped.
  st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 0
  [ "$st" != Z ] || return 0
  echo "$pid"
}

running() { # PID: 0 while it runs (not gone, not a zombie)
  [ -d "/proc/$1" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]
}

gone_within() { # PID SECONDS: 0 once it is gone (or a zombie)
  n=0
  while [ "$n" -lt $(($2 * 5)) ]; do
    running "$1" || return 0
    sleep 0.2
    n=$((n + 1))
  done
  return 1
}

check_name() {
  case $1 in
    etcd) [ -f "$ETC/etcd.env" ] || die "etcd: no $ETC/etcd.env (not an etcd host)" ;;
    *[!A-Za-z0-9._-]* | '' | .*) die "$1: not a node id" ;;
    *) [ -f "$ETC/$1.env" ] || die "$1: no $ETC/$1.env (no such node here)" ;;
  esac
}

# The daemon's launcher: a clean environment loaded from the env files, its
# pid written, then exec. $1 the pid file, $2 how many env files follow, then
# the files, then the command.
# shellcheck disable=SC2016 # expanded by the launcher's sh, not here
LAUNCH='pidf=$1; n=$2; shift 2
while [ "$n" -gt 0 ]; do
  while IFS= read -r l || [ -n "$l" ]; do
    case $l in [A-Za-z_]*=*) export "$l" ;; esac
  done <"$1"
  shift; n=$((n - 1))
done
ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -H -n)" 2>/dev/null || true
echo $$ >"$pidf"
exec "$@"'

as_user() { # USER: the setpriv prefix dropping to USER, nothing for root
  [ "$1" = root ] && return 0
  id -u "$1" >/dev/null 2>&1 || die "no user $1 on this host"
  echo "setpriv --reuid=$1 --regid=$(id -gn "$1") --init-groups --no-new-privs --"
}

start() { # NAME [wait]
  check_name "$1"
  pid=$(pid_of "$1")
  if [ -n "$pid" ]; then say "$1 already runs (pid $pid)"; return 0; fi
  install -d -m 0755 "$RUN"
  install -d -m 0750 "$LOGS"
  log=$LOGS/$1.log pidf=$RUN/$1.pid
  rm -f "$pidf"
  off=0
  [ -f "$log" ] && off=$(wc -c <"$log")
  if [ "$1" = etcd ]; then user=$(as_user "$ETCD_USER"); else user=$(as_user "$RUN_USER"); fi
  set -f # the node's WARMLAKED_ARGS and the setpriv prefix are split on spaces, never globbed
  if [ "$1" = etcd ]; then
    # shellcheck disable=SC2086
    env -i PATH="$PATH" setsid /bin/sh -c "$LAUNCH" wl-init "$pidf" 1 "$ETC/etcd.env" \
      $user "$(exe_of etcd)" </dev/null >>"$log" 2>&1 &
  else
    # The unit's ExecStart, its ${WARMLAKE_ETCD} and $WARMLAKED_ARGS from the env file.
    etcd=$(sed -n 's/^WARMLAKE_ETCD=//p' "$ETC/$1.env" | tail -1)
    args=$(sed -n 's/^WARMLAKED_ARGS=//p' "$ETC/$1.env" | tail -1)
    [ -d "$DATA/$1" ] || die "$1: no data directory $DATA/$1"
    # shellcheck disable=SC2086
    env -i PATH="$PATH" setsid /bin/sh -c "$LAUNCH" wl-init "$pidf" 2 "$ETC/credentials" "$ETC/$1.env" \
      $user "$BIN/warmlaked" --etcd "$etcd" --node "$1" --data "$DATA/$1" \
      --cluster-secret-file "$ETC/cluster-secret" $args </dev/null >>"$log" 2>&1 &
  fi
  set +f
  n=0 pid=''
  # The launcher writes the pid file at once; on a loaded machine "at once" took over 5 s
  # (a CI run beside other builds: a restart reported "did not start"). The pid is the
  # launcher's shell until it has exec'd setpriv and setpriv the binary: written and still
  # running is a start under way (taken for "already gone", a loaded CI run said "n1 did
  # not start" with nothing in its log); written and not running is gone.
  while [ "$n" -lt 300 ]; do
    pid=$(pid_of "$1")
    [ -z "$pid" ] || break
    if [ -s "$pidf" ]; then
      lp=$(cat "$pidf" 2>/dev/null)
      case $lp in '' | *[!0-9]*) ;; *) running "$lp" || break ;; esac
    fi
    sleep 0.1
    n=$((n + 1))
  done
  if [ -z "$pid" ]; then
    tail -n 20 "$log" >&2 || true
    die "$1 did not start (the end of $log above)"
  fi
  echo "$off" >"$RUN/$1.logstart" # where wait looks for its ready line
  if [ "$1" = etcd ]; then
    # Not ready before a quorum of members runs: only see that it did not exit at once.
    sleep 1
    [ -n "$(pid_of etcd)" ] || { tail -n 20 "$log" >&2 || true; die "etcd exited (the end of $log above)"; }
    say "etcd started (pid $pid, log $log)"
  elif [ "${2:-}" = wait ]; then
    wait_ready "$1"
  else
    say "$1 started (pid $pid, log $log)"
  fi
}

wait_ready() { # NAME: until its log says ready since its last start (bounded), or it exits
  check_name "$1"
  [ "$1" != etcd ] || die "wait: etcd has no ready line (it waits for a quorum)"
  log=$LOGS/$1.log
  off=$(cat "$RUN/$1.logstart" 2>/dev/null || echo 0)
  case $off in '' | *[!0-9]*) off=0 ;; esac
  n=0
  while :; do
    pid=$(pid_of "$1")
    # grep without -q reads to the end: tail never dies of SIGPIPE.
    if tail -c "+$((off + 1))" "$log" 2>/dev/null | grep -F "ready port=" >/dev/null; then
      [ -n "$pid" ] || die "$1 was ready and is no more: see $log"
      say "$1 ready (pid $pid, log $log)"
      return 0
    fi
    if [ -z "$pid" ]; then
      tail -n 20 "$log" >&2 || true
      die "$1 is not running (the end of $log above)"
    fi
    [ "$n" -lt $((WAIT * 5)) ] || die "$1 (pid $pid) not ready in $WAIT s: see $log"
    sleep 0.2
    n=$((n + 1))
  done
}

stop() { # NAME
  check_name "$1"
  pid=$(pid_of "$1")
  if [ -z "$pid" ]; then
    rm -f "$RUN/$1.pid"
    say "$1 is not running"
    return 0
  fi
  t=120
  [ "$1" != etcd ] || t=30
  kill -TERM "$pid" 2>/dev/null || true
  if ! gone_within "$pid" "$t"; then
    echo "wl-init: $1 (pid $pid) still up after $t s: SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    gone_within "$pid" 10 || die "$1 (pid $pid) survived SIGKILL for 10 s"
  fi
  rm -f "$RUN/$1.pid"
  say "$1 stopped (pid $pid)"
}

status() { # NAME...
  rc=0
  for name in "$@"; do
    pid=$(pid_of "$name")
    if [ -n "$pid" ]; then echo "$name running (pid $pid)"; else echo "$name stopped"; rc=3; fi
  done
  return "$rc"
}

[ $# -ge 1 ] || { sed -n '8,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
cmd=$1
shift
case $cmd in
  start | stop | restart | wait)
    [ $# -ge 1 ] || die "$cmd: which? (a node id, or etcd)"
    [ "$(id -u)" = 0 ] || die "run as root"
    for name in "$@"; do
      case $cmd in
        start) start "$name" ;;
        stop) stop "$name" ;;
        restart)
          # Waited for only when it ran: a node that did not is started as by start.
          if [ -n "$(pid_of "$name")" ]; then stop "$name" && start "$name" wait; else start "$name"; fi ;;
        wait) wait_ready "$name" ;;
      esac
    done
    ;;
  status)
    if [ $# -eq 0 ]; then
      for f in "$ETC"/*.env; do
        [ -f "$f" ] || continue
        f=${f##*/}
        [ "$f" = etcd.env ] || set -- "$@" "${f%.env}"
      done
      [ ! -f "$ETC/etcd.env" ] || set -- "$@" etcd
    fi
    status "$@"
    ;;
  *) die "unknown command $cmd (start, wait, stop, restart, status)" ;;
esac
