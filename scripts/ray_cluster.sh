#!/usr/bin/env bash
# Start (or stop) the Ray cluster for a 2-node verl run (Table 11: 2 nodes x 8 GPUs). Run it on each node.
#
#   bash scripts/ray_cluster.sh head                    # on node 0; prints the address for the workers
#   HEAD_ADDR=10.0.0.1 bash scripts/ray_cluster.sh worker   # on node 1 (and any further node)
#   bash scripts/ray_cluster.sh status | stop
#
# Two nodes on ONE machine (a rehearsal of the launch; docs/online_learning.md): each raylet gets its own
# temp dir and dashboard-agent port, both bind to loopback, one declared GPU each (verl's CPU platform maps it
# onto the CPU):
#   export NODE_IP=127.0.0.1 GPUS=1 RAY_PORT=46379 DASHBOARD_PORT=48265
#   RAY_TEMP_DIR=/tmp/ray_head bash scripts/ray_cluster.sh head
#   RAY_TEMP_DIR=/tmp/ray_node1 AGENT_PORT=52366 HEAD_ADDR=127.0.0.1 bash scripts/ray_cluster.sh worker
#   RAY_TEMP_DIR=/tmp/ray_node1 bash scripts/ray_cluster.sh stop; RAY_TEMP_DIR=/tmp/ray_head bash scripts/ray_cluster.sh stop
#
# Settings (environment variables; defaults in brackets):
#   NODE_IP         this node's address, --node-ip-address   [Ray's choice: the machine's address]
#                   (Ray 2.60 records 127.0.0.1 as the machine's own address, services.resolve_ip_for_localhost;
#                   the GCS listens on every interface: a rehearsal is on one machine, not sealed in loopback)
#   DASHBOARD_HOST  where the dashboard (and `ray job submit`) listens   [NODE_IP if set, else 0.0.0.0]
#   RAY_PORT [6379] GCS port on the head; workers join HEAD_ADDR:RAY_PORT
#   DASHBOARD_PORT [8265]  CLIENT_PORT [10001] (Ray client server, head only)
#   AGENT_PORT [52365]     dashboard agent HTTP port: one per raylet on a host
#   MIN_WORKER_PORT, MAX_WORKER_PORT  worker ports [Ray's 10002-19999; 0 and 0: ports the OS picks]
#   NODE_MANAGER_PORT, OBJECT_MANAGER_PORT, METRICS_PORT   [Ray's: free ports]
#   GPUS [8 per node]  CPUS [Ray's count]
#   BLOCK [0]       1: stay in the foreground until the node stops (`ray start --block`; under Slurm)
#   RAY_TEMP_DIR    this node's temp dir (logs, sockets, session)   [$RAY_TMPDIR/ray, else /tmp/ray]
#   RAY_AUTH_MODE   disabled | token   [disabled]. Ray 2.60 switches a head to token auth by itself once
#                   ~/.ray/auth_token exists (any local ray.init() writes one), while `ray start --address`,
#                   `ray status` and `ray job submit` send no token unless RAY_AUTH_MODE=token: they then fail
#                   with InvalidAuthToken. This script exports the mode to every Ray process it starts or asks,
#                   so head, workers and clients agree. With token: every node needs the head's token
#                   (~/.ray/auth_token or RAY_AUTH_TOKEN), and every shell that runs `ray ...` needs
#                   RAY_AUTH_MODE=token exported (scripts/submit_verl_2node.sh passes it on).
# `stop` stops the nodes this script started with the same RAY_TEMP_DIR, and only those (every process in
# their session: raylet, GCS, dashboard, workers, a job's driver and its vLLM engines); `ray stop` instead stops
# every Ray process of the machine.
# Ray runs jobs with the `python` first on the raylet's PATH: this checkout's .venv/bin comes first.
# Every node needs the same GPU environment (torch + CUDA, verl 0.9.1, the official vllm, this project's
# dependencies); the project's own code travels with the job (scripts/submit_verl_2node.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
PY_BIN=$(cd "$(dirname "$(command -v "$PY")")" && pwd)
export PATH="$PY_BIN:$PATH"
RAY=${RAY:-ray}
export RAY_AUTH_MODE=${RAY_AUTH_MODE:-disabled}
RAY_PORT=${RAY_PORT:-6379}
DASHBOARD_PORT=${DASHBOARD_PORT:-8265}
GPUS=${GPUS:-8}
NODE_IP=${NODE_IP:-}
DASHBOARD_HOST=${DASHBOARD_HOST:-${NODE_IP:-0.0.0.0}}
TEMP=${RAY_TEMP_DIR:-${RAY_TMPDIR:-/tmp}/ray}

case "$RAY_AUTH_MODE" in
  disabled|token) ;;
  *) echo "error: RAY_AUTH_MODE=$RAY_AUTH_MODE: choose disabled or token" >&2; exit 2 ;;
esac

# flags shared by head and worker; a port left unset is Ray's default
node_flags=(--temp-dir "$TEMP" --num-gpus "$GPUS" --disable-usage-stats)
[ -n "$NODE_IP" ] && node_flags+=(--node-ip-address "$NODE_IP")
[ -n "${CPUS:-}" ] && node_flags+=(--num-cpus "$CPUS")
[ -n "${AGENT_PORT:-}" ] && node_flags+=(--dashboard-agent-listen-port "$AGENT_PORT")
[ -n "${MIN_WORKER_PORT:-}" ] && node_flags+=(--min-worker-port "$MIN_WORKER_PORT")
[ -n "${MAX_WORKER_PORT:-}" ] && node_flags+=(--max-worker-port "$MAX_WORKER_PORT")
[ -n "${NODE_MANAGER_PORT:-}" ] && node_flags+=(--node-manager-port "$NODE_MANAGER_PORT")
[ -n "${OBJECT_MANAGER_PORT:-}" ] && node_flags+=(--object-manager-port "$OBJECT_MANAGER_PORT")
[ -n "${METRICS_PORT:-}" ] && node_flags+=(--metrics-export-port "$METRICS_PORT")
# BLOCK=1: `ray start --block`, the node stays in the foreground until stopped (a Slurm job step: the step's end
# stops the node; scripts/slurm/ray_on_slurm.sh)
[ "${BLOCK:-0}" = 1 ] && node_flags+=(--block)

# `ray start` leaves its daemons running after it returns; started in a session of their own, they (and the
# workers and job drivers they spawn) can be found and stopped by session id, without touching other clusters.
start_node() {  # role, ray start flags...
  local role=$1 record
  shift
  mkdir -p "$TEMP"
  record="$TEMP/ray_cluster.$role.$RAY_PORT.sid"
  if [ -s "$record" ] && session_alive "$(cat "$record")"; then
    echo "error: a $role started by this script is running under $TEMP (session $(cat "$record")); stop it first" >&2
    exit 1
  fi
  setsid --wait bash -c 'echo $$ > "$0"; exec "$@"' "$record" "$RAY" start "$@"
}

session_pids() { ps -eo pid=,sid= | awk -v s="$1" '$2 == s {print $1}'; }

session_alive() {  # true while a Ray daemon of the session runs (a reused session id holds none)
  local pid
  for pid in $(session_pids "$1"); do
    case "$(ps -o comm= -p "$pid" 2>/dev/null)" in raylet|gcs_server) return 0 ;; esac
  done
  return 1
}

# pids of a session whose command name is (=) or is not (!) raylet / gcs_server
session_pick() { ps -eo pid=,sid=,comm= | awk -v s="$1" -v mode="$2" -v name="$3" \
  '$2 == s && ((mode == "=") == ($3 == name)) {print $1}'; }

term_and_wait() {  # sid, = or !, name (and not gcs_server for "!"), seconds
  local pids waited
  pids=$(session_pick "$1" "$2" "$3")
  if [ "$2" = "!" ]; then pids=$(comm -12 <(echo "$pids" | sort) <(session_pick "$1" "!" gcs_server | sort)); fi
  [ -z "$pids" ] && return 0
  # shellcheck disable=SC2086  # a list of pids
  kill -TERM $pids 2>/dev/null || true
  for waited in $(seq 1 $(($4 * 4))); do
    pids=$(for pid in $pids; do if kill -0 "$pid" 2>/dev/null; then echo "$pid"; fi; done)
    [ -z "$pids" ] && return 0
    sleep 0.25
  done
}

stop_nodes() {
  local record sid pids waited found=0
  for record in "$TEMP"/ray_cluster.*.sid; do
    [ -e "$record" ] || continue
    found=1
    sid=$(cat "$record")
    if [ -n "$sid" ] && session_alive "$sid"; then
      # Ray's own order (`ray stop`): the raylet first (its agents would report it dead), then everything
      # else but the GCS, the GCS last; 5 s each, then SIGKILL for what is left
      term_and_wait "$sid" = raylet 5
      term_and_wait "$sid" "!" raylet 5
      term_and_wait "$sid" = gcs_server 5
      pids=$(session_pids "$sid")
      if [ -n "$pids" ]; then
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null || true
        for waited in $(seq 1 20); do [ -z "$(session_pids "$sid")" ] && break; sleep 0.25; done
      fi
      echo "stopped $(basename "$record" .sid | cut -d. -f2) (session $sid)"
    fi
    rm -f "$record"
  done
  [ "$found" = 1 ] || echo "no Ray node started by this script under $TEMP (\`ray stop\` stops every Ray process here)"
}

case "${1:-}" in
  head)
    if [ "$RAY_AUTH_MODE" = token ]; then "$RAY" get-auth-token --generate >/dev/null; fi
    head_flags=(--head --port "$RAY_PORT" --dashboard-host "$DASHBOARD_HOST" --dashboard-port "$DASHBOARD_PORT")
    [ -n "${CLIENT_PORT:-}" ] && head_flags+=(--ray-client-server-port "$CLIENT_PORT")
    start_node head "${head_flags[@]}" "${node_flags[@]}"
    echo "workers: HEAD_ADDR=${NODE_IP:-$(hostname -I | awk '{print $1}')} bash scripts/ray_cluster.sh worker"
    echo "jobs:    ray job submit --address http://${NODE_IP:-$DASHBOARD_HOST}:$DASHBOARD_PORT ... (RAY_AUTH_MODE=$RAY_AUTH_MODE)"
    ;;
  worker)
    : "${HEAD_ADDR:?set HEAD_ADDR to the head node IP address}"
    start_node worker --address "$HEAD_ADDR:$RAY_PORT" "${node_flags[@]}"
    ;;
  status)
    if [ -n "${HEAD_ADDR:-}${NODE_IP:-}" ]; then "$RAY" status --address "${HEAD_ADDR:-$NODE_IP}:$RAY_PORT"
    else "$RAY" status; fi ;;
  stop) stop_nodes ;;
  *) echo "usage: $0 head|worker|status|stop" >&2; exit 2 ;;
esac
