# shellcheck shell=bash
# One node broken in each way slurm-rl's preflight looks for (sourced by slurm-lab):
#   slurm-lab break NODE disk|gpu|fabric-down|fabric-slow|python    slurm-lab mend NODE
# Each acts on NODE alone: its /tmp is a filesystem of its own (a loop ext4 per node, made as the
# node starts), and the rest is done in NODE's own namespaces: a GPU device file hidden (a tmpfs
# over the device dir with the others recreated), its fabric interface down or shaped (tc tbf:
# these machines have no netem), a torch that cannot be imported (its __init__.py replaced by a
# bind mount). `mend` undoes whatever `break` did to NODE; a node `fail`ed and revived is mended.
NODE_TMP_GB=${SLURM_LAB_NODE_TMP_GB:-24}  # sparse; an unpacked Apptainer image per job takes ~4
FILLER=.slurm-lab-full  # the file that fills a broken node's /tmp
FABRIC_SLOW_RATE=${SLURM_LAB_FABRIC_SLOW_RATE:-2mbit}

node_tmp_mount() {  # K: node K's /tmp on a filesystem of its own (kept while the lab is up)
  local k=$1 dir=$STATE/nodes/$NODE$1/tmp img=$LOCAL_DISK/$NODE$1-tmp.img
  mkdir -p "$dir"
  mountpoint -q "$dir" && return 0
  if ! { truncate -s "${NODE_TMP_GB}G" "$img" && mkfs.ext4 -q -F -m 0 "$img" && mount -o loop,discard "$img" "$dir"; }; then
    rm -f "$img"
    log "warning: $NODE$k's /tmp is a directory of the nodes' shared disk (no loop device): \`break $NODE$k disk\` cannot work"
  fi
}

node_tmp_unmount_all() {  # before the nodes' shared disk goes
  local dir
  for dir in "$STATE"/nodes/"$NODE"*/tmp; do
    if mountpoint -q "$dir" 2>/dev/null; then umount "$dir" 2>/dev/null || umount -l "$dir"; fi
  done
  rm -f "$LOCAL_DISK"/"$NODE"*-tmp.img
}

in_node() {  # NODE CMD...: CMD in NODE's namespaces (its /proc is its PID namespace's)
  local node=$1 pid; shift
  pid=$(node_init_pid "$node" 2>/dev/null) && [ -n "$pid" ] || die "$node is not running (try: $0 status)"
  nsenter -t "$pid" --mount --net --pid --uts -- "$@"
}

torch_init() {  # where the lab's Python has torch's __init__.py (the venv the nodes run)
  "${SLURM_LAB_PYTHON:-python3}" -c 'import importlib.util as u; print(u.find_spec("torch").origin)' 2>/dev/null \
    || die "${SLURM_LAB_PYTHON:-python3} has no torch: run from the project's venv (or set SLURM_LAB_PYTHON)"
}

cmd_break() {
  local node=${1:-} kind=${2:-} dir free init
  [[ $node =~ ^$NODE([0-9]+)$ ]] && [ -d "$STATE/nodes/$node" ] || die "break NODE KIND: NODE is a lab node (${NODE}1, ${NODE}2, ...), got '$node'"
  mkdir -p "$STATE/run/broken"
  case $kind in
    disk)
      dir=$STATE/nodes/$node/tmp
      mountpoint -q "$dir" || die "$node's /tmp is no filesystem of its own (see \`up\`'s warning): cannot fill it alone"
      echo "$kind" >>"$STATE/run/broken/$node"  # (first: mend removes what a failed fill left)
      free=$(df -B1 --output=avail "$dir" | tail -1)
      fallocate -l "$free" "$dir/$FILLER" 2>/dev/null || true  # the extents' own blocks: it stops short
      [ "$(df -B1 --output=avail "$dir" | tail -1)" -lt $((1 << 20)) ] || die "could not fill $node's /tmp"
      log "$node: /tmp full ($(df -h --output=avail "$dir" | tail -1 | tr -d ' ') left); the other nodes' untouched";;
    gpu)
      [ -e "$STATE/dev/nvidia0" ] || die "the lab has no GPUs (up --gpus N)"
      # a tmpfs over the node's device dir, every device file but nvidia0 made again
      in_node "$node" sh -c 'set -e; d=$1; keep=$(ls "$d"); mount -t tmpfs -o size=64k,mode=0755 slurm-lab-broken "$d"
        for f in $keep; do [ "$f" = nvidia0 ] || { mknod "$d/$f" c 195 "${f#nvidia}"; chmod 0666 "$d/$f"; }; done' sh "$STATE/dev"
      log "$node: GPU 0's device file hidden ($STATE/dev/nvidia0)";;
    fabric-down)
      in_node "$node" ip link set fab0 down
      log "$node: fab0 down";;
    fabric-slow)
      in_node "$node" tc qdisc replace dev fab0 root tbf rate "$FABRIC_SLOW_RATE" burst 16kbit latency 500ms
      log "$node: fab0 shaped to $FABRIC_SLOW_RATE (tbf)";;
    python)
      init=$(torch_init)
      printf 'raise ImportError("torch is broken on this node (slurm-lab break NODE python)")\n' >"$STATE/run/broken/torch_init.py"
      in_node "$node" mount --bind "$STATE/run/broken/torch_init.py" "$init"
      log "$node: $init raises ImportError there";;
    *) die "break NODE KIND: KIND is disk, gpu, fabric-down, fabric-slow or python, got '$kind'";;
  esac
  echo "$kind" >>"$STATE/run/broken/$node"
}

cmd_mend() {
  local node=${1:-} kind init
  [[ $node =~ ^$NODE[0-9]+$ ]] && [ -d "$STATE/nodes/$node" ] || die "mend NODE: NODE is a lab node (${NODE}1, ${NODE}2, ...), got '$node'"
  [ -f "$STATE/run/broken/$node" ] || { log "$node: nothing broken"; return 0; }
  for kind in $(sort -u "$STATE/run/broken/$node"); do
    case $kind in
      disk) rm -f "$STATE/nodes/$node/tmp/$FILLER";;
      gpu) in_node "$node" sh -c 'while mountpoint -q "$1"; do umount "$1" || break; done' sh "$STATE/dev" || true;;
      fabric-down) in_node "$node" ip link set fab0 up || true;;
      fabric-slow) in_node "$node" tc qdisc del dev fab0 root 2>/dev/null || true;;
      python)
        init=$(torch_init)
        in_node "$node" sh -c 'while mountpoint -q "$1"; do umount "$1" || break; done' sh "$init" || true;;
    esac
  done
  rm -f "$STATE/run/broken/$node"
  log "$node mended"
}
