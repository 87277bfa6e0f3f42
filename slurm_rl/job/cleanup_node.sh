# Stop job J's processes on this node, remove its node-local temp dir and what the job's
# container runtime left of its steps (LEFTOVERS: that runtime's shell, slurm_rl/runtimes, which
# prints each name it removed), print one JSON line saying what was done. The plain shell twin of
# `python -m slurm_rl.job.cleanup` for container jobs: it runs on the bare node (which may have
# no python) and never starts the job's image again.
#
#   bash -c "$(cat cleanup_node.sh)" slurm-rl-cleanup JOB_ID GRACE_S TEMP_DIR [LEFTOVERS]
#
# A process is the job's only on positive evidence, as in core/procs.py: SLURM_RL_JOB_ID=J in
# its environment, or the job's temp dir in its command line; never a cleanup's own command, nor
# what launched it here (an srun on the batch host carries the temp dir too): the word
# slurm-rl-cleanup or slurm_rl.job.cleanup in its command line; never another user's process
# unless this runs as root (anyone may name this job's temp dir in an argv). Containers share the
# node's PID namespace, so their processes are visible (and killable) from here.
set -u
# Killing the job's driver ends the job, and SLURM then signals this step too (SIGTERM, then
# SIGKILL after KillWait): finish the (bounded) work and print the report regardless.
trap '' TERM HUP INT
job=$1 grace=$2 temp=$3 leftovers=${4:-}
t0=$(date +%s.%N)
node=${SLURMD_NODENAME:-$(hostname)}

ancestors=" "
p=$$
while [ -n "$p" ] && [ "$p" -gt 1 ] 2>/dev/null; do
  ancestors="$ancestors$p "
  stat=$(cat "/proc/$p/stat" 2>/dev/null) || break
  stat=${stat##*) }; stat=${stat#* }; p=${stat%% *}  # field 4, after "pid (comm) state"
done

uid=$(id -u)
# Bash builtins only while scanning, so the scan's own processes never carry the temp dir.
job_pids() {
  local d pid item state line
  local -a items args
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    case "$ancestors$BASHPID " in *" $pid "*) continue;; esac  # us, and this subshell
    if [ "$uid" != 0 ]; then  # the Uid line's first field, the real uid
      while read -r item line; do [ "$item" = Uid: ] && break; done <"$d/status" 2>/dev/null || continue
      [ "${line%%[[:space:]]*}" = "$uid" ] || continue
    fi
    args=()
    mapfile -d '' args 2>/dev/null <"$d/cmdline" || continue
    for item in "${args[@]}"; do
      case $item in slurm-rl-cleanup | slurm_rl.job.cleanup) continue 2;; esac
    done
    items=()
    mapfile -d '' items 2>/dev/null <"$d/environ" || continue
    for item in "${items[@]}"; do
      [ "$item" = "SLURM_RL_JOB_ID=$job" ] && { echo "$pid"; continue 2; }
    done
    for item in "${args[@]}"; do
      case $item in "$temp" | *"$temp/"*) echo "$pid"; continue 2;; esac
    done
  done
}

alive() {  # a zombie is dead: only its parent's wait is missing
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

killed=""
pids=$(job_pids)
if [ -n "$pids" ]; then
  declare -A name_of=()
  for pid in $pids; do name_of[$pid]=$(tr -d '"\\\n' <"/proc/$pid/comm" 2>/dev/null); done
  kill -TERM $pids 2>/dev/null
  end=$(awk -v t="$(date +%s.%N)" -v g="$grace" 'BEGIN{printf "%.3f", t + g}')
  while :; do
    left=""; for pid in $pids; do alive "$pid" && left="$left $pid"; done
    [ -z "$left" ] && break
    awk -v e="$end" -v t="$(date +%s.%N)" 'BEGIN{exit !(t >= e)}' && break
    sleep 0.1
  done
  for pid in $pids; do
    if alive "$pid"; then kill -KILL "$pid" 2>/dev/null; sig=KILL; else sig=TERM; fi
    killed="$killed${killed:+, }{\"pid\": $pid, \"name\": \"${name_of[$pid]:-?}\", \"signal\": \"$sig\"}"
  done
fi

# Processes still writing under the temp dir that carry no marker (Apptainer's unsquashfs, as an
# ordinary user, runs with Apptainer's own environment): whichever has its cwd or a file open there.
holders() {
  local dir fd
  for dir in /proc/[0-9]*; do
    [ -O "$dir" ] || continue  # our own processes only
    case "$ancestors$BASHPID " in *" ${dir#/proc/} "*) continue ;; esac  # us, and this subshell
    for fd in "$dir"/cwd "$dir"/fd/*; do
      case "$(readlink "$fd" 2>/dev/null)" in "$temp" | "$temp"/*) echo "${dir#/proc/}"; break ;; esac
    done
  done
}

kill_holders() {
  local pid name
  for pid in $(holders); do
    name=$(tr -d '"\\\n' <"/proc/$pid/comm" 2>/dev/null)
    kill -KILL "$pid" 2>/dev/null && killed="$killed${killed:+, }{\"pid\": $pid, \"name\": \"${name:-?}\", \"signal\": \"KILL\"}"
  done
}

removed=false existed=false
[ -d "$temp" ] && existed=true
for _ in 1 2 3 4 5 6 7 8 9 10; do  # a writer killed just now may still recreate what rm removed
  [ -d "$temp" ] || break
  kill_holders
  rm -rf "$temp" 2>/dev/null
  [ -d "$temp" ] || break
  sleep 0.2
done
$existed && [ ! -d "$temp" ] && removed=true

containers=""
if [ -n "$leftovers" ]; then
  for c in $(job=$job bash -c "$leftovers" 2>/dev/null); do
    containers="$containers${containers:+, }\"$c\""
  done
fi

seconds=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.3f", b - a}')
printf '{"node": "%s", "killed": [%s], "temp_dir_removed": %s, "containers_removed": [%s], "seconds": %s}\n' \
  "$node" "$killed" "$removed" "$containers" "$seconds"
