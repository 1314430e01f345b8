#!/usr/bin/env bash
# Work-queue sitting: Berth (share groups), RabbitMQ quorum queue and NATS
# JetStream work-queue stream, one after another on this machine, loopback
# only, REPS repetitions each; then the medians (see README.md).
#
# usage: bench/queuepeers/run.sh [berth|nats|rabbitmq|report]...   (default: all of them)
# env:   BERTH_REV=HEAD REPS=3 WORKERS=1,4,16 COUNT=200000 SIZE=1024 RATE=1000 LATDUR=10s
#        OUT=/tmp/queuebench  NATS_SERVER=<path>  QUIET_PCT=25 QUIET_WAIT=240
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/queuebench}
REPS=${REPS:-3}
WORKERS=${WORKERS:-1,4,16}
COUNT=${COUNT:-200000}
SIZE=${SIZE:-1024}
RATE=${RATE:-1000}
LATDUR=${LATDUR:-10s}
RESULTS=$OUT/results.tsv
NATS_SERVER=${NATS_SERVER:-$(command -v nats-server || echo "$(go env GOPATH)/bin/nats-server")}
mkdir -p "$OUT/bin" "$OUT/logs"

log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$OUT/logs/sitting.log" >&2; }

wait_port() { # host port tries
  local i
  for ((i = 0; i < ${3:-100}; i++)); do
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && return 0
    sleep 0.3
  done
  return 1
}

stop_pid() { # TERM our own pid, wait up to 30 s, then KILL
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.3; done
  kill -KILL "$pid" 2>/dev/null
}

# wait_quiet: wait (at most QUIET_WAIT s) until the machine's CPU use over
# 1 s is below QUIET_PCT ticks (of 100 per core), and log what it was.
busy_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }
wait_quiet() {
  local i a b pct
  for ((i = 0; i < ${QUIET_WAIT:-240}; i++)); do
    a=$(busy_ticks); sleep 1; b=$(busy_ticks); pct=$((b - a))
    if [ "$pct" -lt "${QUIET_PCT:-25}" ]; then
      log "quiet: ${pct}% CPU busy over 1 s; $(uptime | sed 's/.*load/load/')"
      return 0
    fi
    [ $((i % 10)) -eq 0 ] && log "machine busy (${pct}% CPU), waiting"
  done
  log "machine still busy after ${QUIET_WAIT:-240}s (${pct}%), running anyway; $(uptime | sed 's/.*load/load/')"
}

# Berth is built from a commit (BERTH_REV, default HEAD) exported with git
# archive, so edits in progress in the work tree do not leak into a sitting.
build() {
  local src=$OUT/src
  rm -rf "$src"; mkdir -p "$src"
  (cd "$ROOT" && git archive "${BERTH_REV:-HEAD}" | tar -x -C "$src") || exit 1
  (cd "$src" && go build -o "$OUT/bin/berth" ./cmd/berth) || exit 1
  (cd "$HERE" && go build -o "$OUT/bin/queuepeers" .) || exit 1
}

do_berth() {
  local pid rep js dir=$OUT/data/berth
  rm -rf "$dir"; mkdir -p "$dir"
  "$OUT/bin/berth" serve --log.dirs "$dir" --listeners PLAINTEXT://127.0.0.1:19392 --http.listener "" \
    >"$OUT/logs/berth.log" 2>&1 & pid=$!
  wait_port 127.0.0.1 19392 || { log "berth did not start"; stop_pid "$pid"; return 1; }
  log "berth pid=$pid $("$OUT/bin/berth" version 2>/dev/null | head -1)"
  for ((rep = 1; rep <= REPS; rep++)); do
    wait_quiet
    log "berth rep=$rep"
    js=$(timeout 900 "$OUT/bin/berth" bench queue -b 127.0.0.1:19392 --workers "$WORKERS" --count "$COUNT" \
      --size "$SIZE" --rate "$RATE" --latency-duration "$LATDUR" --json 2>>"$OUT/logs/berth-bench.log") \
      && printf 'berth\t%s\n' "$(echo "$js" | tr -d '\n ')" >>"$RESULTS" || log "berth rep=$rep failed"
    log "berth rep=$rep done; $(uptime | sed 's/.*load/load/')"
  done
  stop_pid "$pid"; rm -rf "$dir"
}

peer_reps() { # label peer addr
  local rep js
  for ((rep = 1; rep <= REPS; rep++)); do
    wait_quiet
    log "$1 rep=$rep"
    js=$(timeout 900 "$OUT/bin/queuepeers" --peer "$2" --addr "$3" --workers "$WORKERS" --count "$COUNT" \
      --size "$SIZE" --rate "$RATE" --latency-duration "$LATDUR" --json 2>>"$OUT/logs/$1.log") \
      && printf '%s\t%s\n' "$1" "$js" >>"$RESULTS" || log "$1 rep=$rep failed"
    log "$1 rep=$rep done; $(uptime | sed 's/.*load/load/')"
  done
}

do_nats() { # NATS_ARGS, LABEL: e.g. a config file with sync_interval: always
  local pid dir=$OUT/data/nats
  rm -rf "$dir"
  "$NATS_SERVER" -js -sd "$dir" -a 127.0.0.1 -p 14222 ${NATS_ARGS:-} >"$OUT/logs/nats-server.log" 2>&1 & pid=$!
  wait_port 127.0.0.1 14222 || { log "nats did not start"; stop_pid "$pid"; return 1; }
  log "nats-server pid=$pid $("$NATS_SERVER" --version)"
  peer_reps "${LABEL:-nats-js-workqueue}" nats 127.0.0.1:14222
  stop_pid "$pid"; rm -rf "$dir"
}

do_rabbitmq() {
  local pid epmd_before epmd i dir=$OUT/data/rabbitmq env=/etc/rabbitmq/rabbitmq-env.conf
  mkdir -p /etc/rabbitmq
  [ -f "$env" ] && cp "$env" "$OUT/rabbitmq-env.conf.orig"
  cat >"$env" <<CONF
NODENAME=rabbit@localhost
NODE_IP_ADDRESS=127.0.0.1
NODE_PORT=5672
MNESIA_BASE=$dir/mnesia
LOG_BASE=$dir/log
SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
CONF
  rm -rf "$dir"; mkdir -p "$dir"; chown -R rabbitmq:rabbitmq "$dir" 2>/dev/null
  epmd_before=$(pgrep -x epmd)
  ERL_EPMD_ADDRESS=127.0.0.1 rabbitmq-server >"$OUT/logs/rabbitmq-server.log" 2>&1 & pid=$!
  wait_port 127.0.0.1 5672 300 || { log "rabbitmq did not start"; stop_pid "$pid"; return 1; }
  log "rabbitmq wrapper pid=$pid version=$(rabbitmqctl -n rabbit@localhost version 2>/dev/null)"
  peer_reps "${LABEL:-rabbitmq-quorum}" rabbitmq 127.0.0.1:5672
  rabbitmqctl -n rabbit@localhost stop >/dev/null 2>&1
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.3; done
  kill -0 "$pid" 2>/dev/null && stop_pid "$pid"
  # the node started epmd if none ran before: stop that one, by its pid
  if [ -z "$epmd_before" ]; then epmd=$(pgrep -x epmd); [ -n "$epmd" ] && stop_pid "$epmd"; fi
  [ -f "$OUT/rabbitmq-env.conf.orig" ] && cp "$OUT/rabbitmq-env.conf.orig" "$env"
  rm -rf "$dir"
}

do_report() { "$OUT/bin/queuepeers" report "$RESULTS"; }

build
[ $# -eq 0 ] && set -- berth rabbitmq nats report
for cmd in "$@"; do
  case $cmd in
    berth) do_berth ;;
    nats) do_nats ;;
    rabbitmq) do_rabbitmq ;;
    report) do_report ;;
    *) echo "unknown step $cmd" >&2; exit 2 ;;
  esac
done
