# shellcheck shell=bash
# Sourced by scripts/slurm/pipeline.sbatch and verl.sbatch: a Ray cluster over the nodes of this Slurm allocation.
#
#   ray_on_slurm_start    # head on the first node, a worker on each other; exports RAY_ADDRESS once all are in
#   ray_on_slurm_stop     # stops every node it started (also on exit: the sbatch scripts trap it)
#
# Each node is one `srun` step running scripts/ray_cluster.sh with BLOCK=1 (`ray start --block`: the step lasts
# as long as the node), its own temp dir ($RAY_TEMP_ROOT/tj_ray_<job>_<i>) and dashboard-agent port (AGENT_PORT +
# i), so that two nodes on one host (the test's Slurm, tests/slurm/cluster.py) do not collide. The head's address is
# what `hostname --ip-address` says on the first node, or NODE_IP when set (every node then uses it: one host).
# The cluster is ready when `python -m thinkj.online.ray_cluster` finds NNODES live nodes of GPUS_PER_NODE GPUs
# (the same check the online stage makes before launching verl); RAY_WAIT [300] seconds at most.

RAY_ON_SLURM_NODES=()  # the allocation's nodes, the head first (set by ray_on_slurm_start)

ray_on_slurm_start() {
  local nodes head head_ip i role deadline
  mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
  head=${nodes[0]}
  head_ip=${NODE_IP:-$(srun --overlap --nodes=1 --ntasks=1 -w "$head" hostname --ip-address | awk '{print $1}')}
  export RAY_PORT=${RAY_PORT:-6379} RAY_AUTH_MODE=${RAY_AUTH_MODE:-disabled}
  RAY_ON_SLURM_NODES=("${nodes[@]}")
  for i in "${!nodes[@]}"; do
    role=worker
    [ "$i" = 0 ] && role=head
    srun --overlap --nodes=1 --ntasks=1 -w "${nodes[$i]}" --output "$RAY_LOGS/ray_node$i.log" \
      env BLOCK=1 HEAD_ADDR="$head_ip" GPUS="$GPUS_PER_NODE" RAY_TEMP_DIR="$(_ray_temp "$i")" \
      AGENT_PORT=$((${AGENT_PORT:-52365} + i)) bash scripts/ray_cluster.sh "$role" &
    if [ "$i" = 0 ]; then _ray_wait "$head_ip:$RAY_PORT" 1 0 || return 1; fi  # workers join a head that is up
  done
  _ray_wait "$head_ip:$RAY_PORT" "${#nodes[@]}" "$GPUS_PER_NODE" || return 1
  export RAY_ADDRESS="$head_ip:$RAY_PORT"
}

_ray_temp() { echo "${RAY_TEMP_ROOT:-/tmp}/tj_ray_${SLURM_JOB_ID}_$1"; }

_ray_wait() {  # address, nodes, gpus per node: poll the cluster check until it passes or RAY_WAIT runs out
  local deadline=$((SECONDS + ${RAY_WAIT:-300})) out
  while true; do
    if out=$("$PY" -m thinkj.online.ray_cluster --address "$1" --nnodes "$2" --gpus-per-node "$3" 2>&1); then
      echo "[ray on slurm] $out"
      return 0
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "[ray on slurm] the cluster did not come up in ${RAY_WAIT:-300} s: $out (node logs: $RAY_LOGS)" >&2
      return 1
    fi
    sleep 5
  done
}

ray_on_slurm_stop() {
  local i
  for i in "${!RAY_ON_SLURM_NODES[@]}"; do  # workers first, the head last, as `ray_cluster.sh stop` expects
    [ "$i" = 0 ] && continue
    srun --overlap --nodes=1 --ntasks=1 -w "${RAY_ON_SLURM_NODES[$i]}" \
      env RAY_TEMP_DIR="$(_ray_temp "$i")" bash scripts/ray_cluster.sh stop || true
  done
  if [ "${#RAY_ON_SLURM_NODES[@]}" -gt 0 ]; then
    srun --overlap --nodes=1 --ntasks=1 -w "${RAY_ON_SLURM_NODES[0]}" \
      env RAY_TEMP_DIR="$(_ray_temp 0)" bash scripts/ray_cluster.sh stop || true
  fi
  wait  # the node steps end with their nodes
}
