#!/bin/bash
# slurm-rl: the instances of a part with an image of its own, on this node, in that image (which
# needs bash, and util-linux for an isolated part; no python, no slurm-rl). The batch script
# starts this in a step of its own on the part's nodes (a sidecar's: its host part's nodes); the
# node's slurm-rl service runner, in the job's image, says what to run through files in the job
# dir (job/service_remote.py), per instance I:
#   NODE-I.want  "GEN run" | "GEN stop"  a new GEN ends what runs; "run" starts NODE-I.run
#   NODE-I.run   the instance's script (its environment, its directory, its command, its log)
#   NODE-I.pid   "GEN PID" of what runs      NODE-I.exit  "GEN CODE" once it ended
# It ends every instance and exits when the job's services/stop file appears.
# argv: PART COUNT
part=$1 count=$2
dir=$SLURM_RL_JOB_DIR/services/$part
node=${SLURMD_NODENAME:-$(hostname)}

ended() { [ -e "$SLURM_RL_JOB_DIR/services/stop" ]; }

write() {  # FILE TEXT, atomically
  printf '%s\n' "$2" >"$1.$$" && mv -f "$1.$$" "$1"
}

stop_group() {  # PID: SIGTERM to its process group, SIGKILL after 3 s
  local i
  kill -TERM -- "-$1" 2>/dev/null || return 0
  for i in $(seq 15); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.2; done
  kill -KILL -- "-$1" 2>/dev/null
}

instance() {  # I
  local base=$dir/$node-$1 seen= pid= want gen action
  while ! ended; do
    want=$(cat "$base.want" 2>/dev/null) || want=
    gen=${want%% *} action=${want#* }
    if [ -n "$pid" ] && [ "$gen" != "$seen" ]; then stop_group "$pid"; fi
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"
      write "$base.exit" "$seen $?"
      pid=
    fi
    if [ -z "$pid" ] && [ -n "$gen" ] && [ "$gen" != "$seen" ]; then
      seen=$gen
      if [ "$action" = run ]; then
        setsid bash "$base.run" </dev/null &
        pid=$!
        write "$base.pid" "$gen $pid"
      fi
    fi
    sleep 0.2
  done
  [ -z "$pid" ] || stop_group "$pid"
}

mkdir -p "$dir"
for i in $(seq 0 $((count - 1))); do instance "$i" & done
wait
