# shellcheck shell=bash
# The lab's ordinary users (sourced by slurm-lab), made as a site administrator makes them: uid
# >= 1000, a home on the shared filesystem (/home, which every node and rootfs sees), no sudo,
# no capabilities, an association in each of the lab's accounts, a key the login node accepts.
# `up` makes LAB_ORDINARY_USERS; `slurm-lab user add NAME` makes one more (a name that exists is
# brought to the same state, and succeeds). What the users need of the machine is opened to them
# and written down, so that `down` puts it back:
#   - the interpreters' prefixes (the machine's python3, the checkout's .venv, the NeMo Gym venv)
#     and the checkout (CI's venvs are made from pyenv's Python in root's home, mode 0700: the
#     directories above them get o+x, nothing more);
#   - the lab specs' fileroot, a scratch directory everyone may write, sticky (as /tmp): slurm-rl
#     makes <fileroot>/<user> itself and refuses one somebody else made.
# Files: $USERS_ADDED (the names `user add` was given: the next `up` keeps them), $USERS_MADE
# (users the lab created: `down` removes them and their homes; a user that existed stays), $OPENED
# (MODE PATH of each path whose mode was changed: `down` restores it). All outside $STATE/run,
# which `up` renews.
LAB_ORDINARY_USERS="srl-user srl-other"
USERS_ADDED=$STATE/users-added
USERS_MADE=$STATE/users-made
OPENED=$STATE/opened-paths
LAB_FILEROOT=/var/tmp/slurm-rl  # cluster_specs/lab*.json

valid_user_name() { [[ $1 =~ ^[a-z_][a-z0-9_-]{0,31}$ ]]; }

# Every user the lab knows: the defaults, and each one `user add` made.
lab_user_names() {
  { printf '%s\n' $LAB_ORDINARY_USERS; cat "$USERS_ADDED" 2>/dev/null || true; } | sed '/^$/d' | awk '!seen[$0]++'
}

# $1: a user name. Creates the user if missing (recorded for `down`); gives it a login key.
ensure_user() {
  local user=$1 home
  valid_user_name "$user" || die "user name '$user': use lower-case letters, digits, - and _ (at most 32, not starting with a digit or -)"
  if ! id "$user" >/dev/null 2>&1; then
    useradd --create-home --home-dir "/home/$user" --shell /bin/bash --user-group "$user" \
      || die "useradd $user failed"
    echo "$user" >>"$USERS_MADE"
  fi
  [ "$(id -u "$user")" -ge 1000 ] || die "user '$user' exists with uid $(id -u "$user") (< 1000): not an ordinary user"
  usermod -p '*' "$user" 2>/dev/null || true  # no password, but not "locked": sshd accepts its key
  home=$(getent passwd "$user" | cut -d: -f6)
  mkdir -p "$home"
  chown "$user:" "$home"; chmod 0700 "$home"
  if [ ! -s "$home/.ssh/id_ed25519" ]; then
    install -d -o "$user" -g "$(id -g "$user")" -m 0700 "$home/.ssh"
    runuser -u "$user" -- ssh-keygen -q -t ed25519 -N '' -C "$user@slurm-lab" -f "$home/.ssh/id_ed25519"
  fi
  # a <fileroot>/<name> of an earlier user of that name (a lab killed before `down` forgot it)
  if [ -d "$LAB_FILEROOT/$user" ] && [ "$(stat -c %u "$LAB_FILEROOT/$user")" != "$(id -u "$user")" ]; then
    rm -rf "${LAB_FILEROOT:?}/$user"
  fi
  mkdir -p "$STATE/login-users"; chmod 0755 "$STATE/login-users"
  install -m 0644 "$home/.ssh/id_ed25519.pub" "$STATE/login-users/$user.pub"
}

# chmod MODE PATH, the old mode written down once (the first change is the one `down` restores).
open_path() {
  local add=$1 path=$2 old
  [ -e "$path" ] || return 0
  old=$(stat -c %a "$path")
  chmod "$add" "$path"
  [ "$(stat -c %a "$path")" = "$old" ] && return 0
  grep -q " $path\$" "$OPENED" 2>/dev/null || echo "$old $path" >>"$OPENED"
}

# Every directory above PATH (and PATH itself when it is a directory) may be traversed by others.
open_ancestors() {
  local p
  p=$(realpath -m "$1")
  while [ "$p" != / ] && [ -n "$p" ]; do
    [ -d "$p" ] && open_path o+x "$p"
    p=$(dirname "$p")
  done
}

# What the users need of the machine: the interpreters and the checkout, the fileroot.
open_machine() {
  local top py
  top=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null || dirname "$(dirname "$SCRIPT_DIR")")
  open_ancestors "$top"
  for py in "$(command -v python3 || true)" "$top/.venv/bin/python" "${GYM_VENV:-$CACHE/gym-venv}/bin/python"; do
    [ -n "$py" ] && [ -e "$py" ] || continue
    open_ancestors "$(dirname "$(realpath "$py")")"
  done
  if [ ! -d "$LAB_FILEROOT" ]; then mkdir -p "$LAB_FILEROOT"; chmod 0755 "$LAB_FILEROOT"; fi
  open_path 1777 "$LAB_FILEROOT"
}

restore_machine() {
  local mode path
  [ -f "$OPENED" ] || return 0
  while read -r mode path; do
    [ -e "$path" ] && chmod "$mode" "$path"
  done <"$OPENED"
  rm -f "$OPENED"
}

# Associations of USER in every lab account (when slurmdbd runs).
user_associations() {
  local user=$1 cluster=$CLUSTER_NAME
  [ "$(cat "$STATE/run/accounting" 2>/dev/null)" = 1 ] || return 0
  sacctmgr -i add user "$user" Account="${LAB_ACCOUNTS// /,}" DefaultAccount=lab Cluster="$cluster" >/dev/null 2>&1 || true
  sacctmgr -i modify user "$user" set QOS=normal,high,small,short DefaultQOS=normal >/dev/null 2>&1 || true
  sacctmgr -n -P show assoc user="$user" format=account | grep -qx lab \
    || die "sacctmgr could not give $user an association in account lab (see $STATE/log/slurmdbd.log)"
}

# Every rootfs the lab has built sees the host's users (the running one and the cached ones).
users_to_rootfs() {
  local r p
  for r in "$CACHE"/rootfs-*/; do
    [ -d "$r/etc" ] || continue
    for p in passwd group; do cp -f "/etc/$p" "$r/etc/$p"; done
  done
}

setup_users() {
  local user
  mkdir -p "$STATE"
  for user in $(lab_user_names); do ensure_user "$user"; done
  open_machine
  users_to_rootfs
}

cmd_user() {
  need_root
  mkdir -p "$STATE"
  case ${1:-} in
    add) [ -n "${2:-}" ] || die "usage: slurm-lab user add NAME";;
    *) die "usage: slurm-lab user add NAME (an ordinary user on every node, in the lab's accounts)";;
  esac
  ensure_user "$2"
  grep -qx "$2" "$USERS_ADDED" 2>/dev/null || echo "$2" >>"$USERS_ADDED"  # the next `up` keeps it
  users_to_rootfs
  user_associations "$2"
  local d; for d in "$STATE"/enroot/*/; do [ -d "$d" ] && enroot_user_dirs "$(basename "$d")"; done
  log "user $2 (uid $(id -u "$2")): on every node and in accounts ${LAB_ACCOUNTS// /, }; key $(getent passwd "$2" | cut -d: -f6)/.ssh/id_ed25519"
}

# enroot's per-user dirs on NODE (slurm-lab-pyxis.sh's enroot.conf), for root and every lab user.
enroot_user_dirs() {
  local node=$1 kind user
  for kind in runtime cache data; do
    mkdir -p "$STATE/enroot/$node/$kind"; chmod 0755 "$STATE/enroot/$node/$kind"
    for user in root $(lab_user_names); do
      id "$user" >/dev/null 2>&1 || continue
      install -d -o "$user" -g "$(id -g "$user")" -m 0700 "$STATE/enroot/$node/$kind/user-$(id -u "$user")"
    done
  done
}

# What a user the lab is about to remove left in the fileroot: its uid may go to another user the
# next `up` makes, who would then own them (its job dirs, a <fileroot>/<name> slurm-rl refuses).
forget_user_files() {
  local user=$1 uid
  uid=$(id -u "$user")
  [ -d "$LAB_FILEROOT" ] || return 0
  rm -rf "${LAB_FILEROOT:?}/$user"
  find "$LAB_FILEROOT" -xdev -mindepth 1 -uid "$uid" -prune -exec rm -rf {} + 2>/dev/null || true
}

# `down`: the users the lab created, their homes, and the modes it changed.
# A lab going down beside another hands it what it made and opened (the users are the machine's:
# the last lab down removes them and puts the machine back).
hand_over_users() {
  local to=$1
  [ ! -f "$USERS_MADE" ] || cat "$USERS_MADE" >>"$to/users-made"
  [ ! -f "$USERS_ADDED" ] || cat "$USERS_ADDED" >>"$to/users-added"
  [ ! -f "$OPENED" ] || cat "$OPENED" >>"$to/opened-paths"
  rm -f "$USERS_MADE" "$USERS_ADDED" "$OPENED"
}

remove_users() {
  local user
  restore_machine
  if [ -f "$USERS_MADE" ]; then
    while read -r user; do
      [ -n "$user" ] && id "$user" >/dev/null 2>&1 || continue
      pkill -KILL -u "$user" 2>/dev/null || true
      forget_user_files "$user"
      userdel --remove "$user" 2>/dev/null || true
    done <"$USERS_MADE"
  fi
  rm -f "$USERS_MADE" "$USERS_ADDED"
  rm -rf "$STATE/login-users"
  users_to_rootfs
}
