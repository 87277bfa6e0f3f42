# Sourced by slurm-lab: the login node (`up --login`). Host `login` (10.77.0.5 on the lab's
# bridge, in /etc/hosts) is a network, PID, UTS and mount namespace like a node's, with a
# private /tmp, running Debian's OpenSSH server and no slurmd: the lab's SLURM commands (the
# same /usr/local/bin wrappers and /etc/slurm as the host's), the shared filesystem and so
# whatever slurm-rl the checkout's venv holds. The lab never touches the machine's ~/.ssh: sshd
# reads its host key and authorized keys from $STATE/login, and `slurm-lab login-key` prints
# the private key it accepts for root@login. Every login is logged ("Accepted publickey") in
# $STATE/log/login-sshd.log, so a test can count connections.

# A lab beside the first has its own: host `blogin` (lab b), its subnet's .5, sessions with
# SLURM_CONF set to that lab's config (the SLURM commands are the machine's, as on the host).
LOGIN_HOST=${LAB_NAME}login
LOGIN_IP=$SUBNET_PREFIX.5
LOGIN_NS=srl${LAB_NAME}-login
LOGIN_VETH=srlvlogin$LAB_NAME
LOGIN_DIR=$STATE/login

login_pid() { node_init_pid "$LOGIN_HOST"; }

login_alive() {
  local pid; pid=$(login_pid 2>/dev/null) || return 1
  [ -n "$pid" ] && nsenter -t "$pid" --pid -- pgrep -x sshd >/dev/null 2>&1
}

login_keys() {
  mkdir -p "$LOGIN_DIR"; chmod 700 "$LOGIN_DIR"
  [ -s "$LOGIN_DIR/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -C "slurm-lab login host key" -f "$LOGIN_DIR/ssh_host_ed25519_key"
  [ -s "$LOGIN_DIR/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C "slurm-lab root@login" -f "$LOGIN_DIR/id_ed25519"
  cp "$LOGIN_DIR/id_ed25519.pub" "$LOGIN_DIR/authorized_keys"; chmod 600 "$LOGIN_DIR/authorized_keys"
  cat >"$LOGIN_DIR/sshd_config" <<CONF
# written by slurm-lab for its login node
ListenAddress $LOGIN_IP
Port 22
HostKey $LOGIN_DIR/ssh_host_ed25519_key
AuthorizedKeysFile $LOGIN_DIR/authorized_keys $STATE/login-users/%u.pub
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile $STATE/run/login-sshd.pid
LogLevel VERBOSE
MaxSessions 64
MaxStartups 64:30:128
AllowTcpForwarding yes
Subsystem sftp internal-sftp
CONF
  [ -z "$LAB_NAME" ] || echo "SetEnv SLURM_CONF=$CONF_DIR/slurm.conf" >>"$LOGIN_DIR/sshd_config"
}

start_login() {
  login_alive && return 0
  apt_install openssh-server openssh-client
  login_keys
  kill_login
  ip netns add "$LOGIN_NS"
  ip link add "$LOGIN_VETH" type veth peer name eth0 netns "$LOGIN_NS"
  ip link set "$LOGIN_VETH" master "$BRIDGE" up
  ip -n "$LOGIN_NS" addr add "$LOGIN_IP/24" dev eth0
  ip -n "$LOGIN_NS" link set lo up
  ip -n "$LOGIN_NS" link set eth0 up
  ip -n "$LOGIN_NS" route add default via "$HOST_IP"
  mkdir -p "$STATE/nodes/login/tmp" "$STATE/nodes/login/stage" "$STATE/log"
  chmod 1777 "$STATE/nodes/login/tmp"
  # a private /tmp with the shared /tmp paths put back (as on a node), then sshd as PID 1's child
  local inner='set -e
    i=0; while IFS= read -r p; do mkdir -p "$STAGE/$i"; mount --bind "$p" "$STAGE/$i"; i=$((i+1)); done <"$SHARES"
    mount --bind "$NTMP" /tmp
    i=0; while IFS= read -r p; do mkdir -p "$p"; mount --bind "$STAGE/$i" "$p"; i=$((i+1)); done <"$SHARES"
    hostname "$LOGIN_HOST"
    mkdir -p /run/sshd
    exec tini -s -- /usr/sbin/sshd -D -f "$CONFIG" -E "$LOG"'
  LOGIN_HOST=$LOGIN_HOST SHARES=$STATE/run/shares STAGE=$STATE/nodes/login/stage NTMP=$STATE/nodes/login/tmp \
    CONFIG=$LOGIN_DIR/sshd_config LOG=$STATE/log/login-sshd.log setsid nsenter --net="/run/netns/$LOGIN_NS" \
    unshare --pid --mount --uts --fork --mount-proc --propagation private \
    bash -c "$inner" </dev/null >>"$STATE/log/node-login.console" 2>&1 &
  echo $! >"$STATE/run/unshare-$LOGIN_HOST.pid"
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/$LOGIN_IP/22") 2>/dev/null && { log "login node up: ssh -i $LOGIN_DIR/id_ed25519 root@$LOGIN_HOST"; return 0; }
    sleep 0.1
  done
  die "the login node's sshd did not start (see $STATE/log/login-sshd.log, $STATE/log/node-login.console)"
}

kill_login() {  # what a killed lab left of the login node: its namespaces and link
  local pid
  if pid=$(login_pid 2>/dev/null) && [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
  kill_pidfile "$STATE/run/unshare-$LOGIN_HOST.pid" unshare
  ip netns del "$LOGIN_NS" 2>/dev/null || true
  ip link del "$LOGIN_VETH" 2>/dev/null || true
}

cmd_login_key() {
  [ -s "$LOGIN_DIR/id_ed25519" ] && login_alive || die "no login node: start the lab with \`up --login\`"
  echo "$LOGIN_DIR/id_ed25519"
}
