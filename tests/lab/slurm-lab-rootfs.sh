# Sourced by slurm-lab: newer SLURMs than the host's, each in a Debian rootfs (facts:
# ../shared/LAB-FACTS.md). `up --slurm 24.11` (Debian trixie) or `--slurm 26.05` (sid) runs
# slurmctld, slurmdbd and every slurmd from that rootfs, with chroot; the host's 22.05 client
# cannot drive them, so `up` puts wrappers for the SLURM commands in /usr/local/bin (first on the
# default PATH) that run the rootfs's own. Jobs run inside the rootfs too, with the host's
# interpreters and venvs: the host paths that jobs and tests use are bind-mounted into it at the
# same paths (ROOTFS_BINDS, the checkout's parent, $SLURM_LAB_SHARE), and /run/munge, so the one
# munged signs for everything.
#
# The rootfs is built once per suite and package list (debootstrap from apt's mirror, then apt in
# a chroot) in $CACHE/rootfs-<suite>-<key>, and reused while those are unchanged.

# version -> Debian suite; "host" is the machine's own packages
SLURM_SUITES="22.05:host 24.11:trixie 26.05:sid"
# the newest that passes the whole suite (tests/lab/slurm-versions runs the smoke set on the others)
DEFAULT_SLURM=26.05
# libffi8, libnsl2: what the host's own (pyenv) interpreters link that a minbase rootfs lacks;
# libslurm-dev: the headers Pyxis is built against; jq ... libbsd0, bsdextrautils (column:
# `enroot list -f`, how pyxis finds a named container), squashfuse (--pyxis-squashfuse): what
# enroot runs; tini: the nodes' PID 1 (each node's root is the rootfs); strace: what the tests
# trace a node's process with
ROOTFS_APT="slurmctld slurmd slurm-client slurmdbd munge iproute2 procps util-linux libffi8 libnsl2
  libslurm-dev jq squashfs-tools zstd pigz libbsd0 gawk tini strace bsdextrautils squashfuse"
ROOTFS_BINDS="/root /home /tmp /var/tmp $STATE $CACHE /run/munge /etc/slurm${LAB_NAME:+ $CONF_DIR}"
# bump when build_rootfs makes a different tree from the same suite and packages
ROOTFS_REV=1
SLURM_WRAPPED="sbatch srun salloc squeue scancel scontrol sacct sacctmgr sinfo sstat sprio sshare sdiag sreport strigger sattach sbcast"
WRAP_MARK="# slurm-lab wrapper"
ROOTFS_MARK=/etc/slurm-lab-rootfs

slurm_suite() {  # $1: version -> its suite, or nothing for a version the lab does not have
  local pair
  for pair in $SLURM_SUITES; do [ "${pair%%:*}" = "$1" ] && { echo "${pair#*:}"; return; }; done
}

rootfs_dir() {  # $1: suite -> its cached rootfs path
  local key
  key=$(printf '%s\n' "$1" "$ROOTFS_APT" "$ROOTFS_REV" | sha256sum | cut -c1-12)
  echo "$CACHE/rootfs-$1-$key"
}

build_rootfs() {  # $1: suite; prints the rootfs path, building it if needed
  local suite=$1 r t0=$SECONDS
  r=$(rootfs_dir "$suite")
  if [ -x "$r/usr/sbin/slurmctld" ] && [ -f "$r$ROOTFS_MARK" ]; then echo "$r"; return 0; fi
  apt_install debootstrap
  log "building a $suite rootfs for its SLURM (debootstrap from $MIRROR; about a minute, once)"
  # what a killed build left: debootstrap's own /proc mount in the half-made tree
  unmount_under "$r.tmp"
  rm -rf --one-file-system "$r" "$r.tmp"; mkdir -p "$CACHE"
  debootstrap --variant=minbase "$suite" "$r.tmp" "$MIRROR" >"$CACHE/debootstrap-$suite.log" 2>&1 \
    || die "debootstrap $suite failed (see $CACHE/debootstrap-$suite.log)"
  # package scripts must not start daemons; sid's Release file may be past its Valid-Until
  printf '#!/bin/sh\nexit 101\n' >"$r.tmp/usr/sbin/policy-rc.d"; chmod 755 "$r.tmp/usr/sbin/policy-rc.d"
  echo 'Acquire::Check-Valid-Until "false";' >"$r.tmp/etc/apt/apt.conf.d/99slurm-lab"
  mount -t proc proc "$r.tmp/proc"
  # shellcheck disable=SC2086
  if ! DEBIAN_FRONTEND=noninteractive chroot "$r.tmp" sh -c \
      "apt-get update -qq && apt-get install -y -qq --no-install-recommends $(echo $ROOTFS_APT)" \
      >>"$CACHE/debootstrap-$suite.log" 2>&1; then
    umount "$r.tmp/proc"; die "apt-get in the $suite rootfs failed (see $CACHE/debootstrap-$suite.log)"
  fi
  umount "$r.tmp/proc"
  rm -rf "$r.tmp"/var/cache/apt/archives/*.deb "$r.tmp"/var/lib/apt/lists/*
  chroot "$r.tmp" dpkg-query -W -f '${Version}\n' slurmctld >"$r.tmp$ROOTFS_MARK"
  mv "$r.tmp" "$r"
  # older builds of this suite go, unless something is still mounted in them (a lab's binds of
  # host paths: never delete through those)
  local old
  for old in "$CACHE/rootfs-$suite-"*; do
    case $old in *.tmp) unmount_under "$old";; esac  # a killed build's: no lab runs from it
    [ "$old" = "$r" ] || [ ! -d "$old" ] || grep -q " $old[/ ]" /proc/mounts || rm -rf --one-file-system "$old"
  done
  log "$suite rootfs ready in $((SECONDS - t0)) s: SLURM $(cat "$r$ROOTFS_MARK") ($(du -sm "$r" | cut -f1) MB)"
  echo "$r"
}

unmount_under() {  # every mount at or under $1, deepest first
  local m
  awk -v d="$1" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
}

# The host paths bound into the rootfs: fixed ones, the checkout's parent (its ../shared too), the
# interpreter's prefix, and $SLURM_LAB_SHARE.
rootfs_bind_paths() {
  local top py
  top=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null || (cd "$SCRIPT_DIR/../.." && pwd))
  py=$(python3 -c 'import sys; print(sys.base_prefix)' 2>/dev/null || true)
  case $py in /usr|/usr/local|/) py=;; esac  # a system interpreter: the rootfs has its own /usr
  # shellcheck disable=SC2086
  { printf '%s\n' $ROOTFS_BINDS; dirname "$top"; [ -n "$py" ] && echo "$py"
    echo "${SLURM_LAB_SHARE:-}" | tr ':' '\n'; } | while read -r p; do
      [ -n "$p" ] && [ -d "$p" ] && realpath "$p"
    done | sort -u | awk 'NR==1 || index($0, prev "/") != 1 {print; prev=$0}'
}

# Mount proc, sys, dev and the shared host paths into the rootfs (recorded for unmount_rootfs).
mount_rootfs() {
  local r=$1 p from
  unmount_rootfs
  # what a lab left whose state was wiped (its list of mounts gone with it); a lab beside the
  # first has just mounted its own fresh overlay at $r
  [ -n "$LAB_NAME" ] || unmount_under "$r"
  mkdir -p /run/munge /etc/slurm "$CONF_DIR"
  : >"$STATE/run/rootfs-mounts"
  # the shared paths first: $CACHE holds the rootfs itself, and a recursive bind made after
  # proc, sys and dev would copy those mounts too
  while read -r p; do
    mkdir -p "$r$p"; mount --rbind "$p" "$r$p"; mount --make-rslave "$r$p"; echo "$r$p" >>"$STATE/run/rootfs-mounts"
  done < <(rootfs_bind_paths)
  # another lab's root (its binds, /proc, its local disk) came along with $CACHE's recursive
  # bind: not this lab's nodes' to see, and it would keep that lab's loop devices busy
  for p in "$CACHE"/rootfs-* "$CACHE"/lab-*-root; do unmount_under "$r$p"; done
  # enroot as the host built it (slurm-lab-pyxis.sh), at the same paths: Pyxis runs it
  for p in /usr/local/lib/enroot "$HOST_ENROOT_ETC" /usr/local/share/enroot /usr/local/bin/enroot*; do
    [ -e "$p" ] || continue
    if [ -d "$p" ]; then mkdir -p "$r$p"; else mkdir -p "$(dirname "$r$p")"; touch "$r$p"; fi
    from=$p  # a lab beside the first: its own enroot config (slurm-lab-pyxis.sh), where it has one
    if [ "$p" = "$HOST_ENROOT_ETC" ] && [ -d "$ENROOT_ETC" ]; then from=$ENROOT_ETC; fi
    mount --bind "$from" "$r$p"; echo "$r$p" >>"$STATE/run/rootfs-mounts"
  done
  mount -t proc proc "$r/proc"; echo "$r/proc" >>"$STATE/run/rootfs-mounts"
  for p in /sys /dev; do
    mount --rbind "$p" "$r$p"; mount --make-rslave "$r$p"; echo "$r$p" >>"$STATE/run/rootfs-mounts"
  done
  echo "$r" >"$STATE/run/rootfs"
  rootfs_sync_etc
}

# Names and users as the host has them (node names are in /etc/hosts; the lab adds users).
rootfs_sync_etc() {
  local r p
  r=$(cat "$STATE/run/rootfs" 2>/dev/null || true)
  [ -n "$r" ] || return 0
  for p in hosts passwd group; do cp -f "/etc/$p" "$r/etc/$p"; done
}

# The root a lab's nodes use: the rootfs itself for the first lab; for a lab beside it, an
# overlay of its own over the rootfs (each lab mounts its shared paths, /proc and its config into
# its nodes' root, and the first lab's `up` unmounts whatever is under the rootfs).
lab_rootfs() {
  local base=$1 own=$CACHE/lab-$LAB_NAME-root rw=$STATE/rootfs-rw
  if [ -z "$LAB_NAME" ]; then echo "$base"; return 0; fi
  drop_lab_rootfs
  mkdir -p "$own" "$rw"
  mount -t tmpfs -o size=256m,mode=0755 slurm-lab-rw "$rw"; mkdir -p "$rw/upper" "$rw/work"
  mount -t overlay slurm-lab-root -o "lowerdir=$base,upperdir=$rw/upper,workdir=$rw/work" "$own" \
    || die "cannot mount an overlay of $base for lab $LAB_NAME (see dmesg)"
  echo "$own"
}

drop_lab_rootfs() {
  [ -n "$LAB_NAME" ] || return 0
  local own=$CACHE/lab-$LAB_NAME-root
  unmount_under "$own"
  while mountpoint -q "$own"; do umount "$own" 2>/dev/null || umount -l "$own" || break; done
  while mountpoint -q "$STATE/rootfs-rw"; do umount -l "$STATE/rootfs-rw" || break; done
  # the mount point, and whatever a failed mount let binds create in it (never through a mount)
  grep -q " $own[/ ]" /proc/mounts || rm -rf --one-file-system "$own"
  return 0
}

unmount_rootfs() {
  local f=$STATE/run/rootfs-mounts p
  [ -f "$f" ] || return 0
  tac "$f" | while read -r p; do umount -R "$p" 2>/dev/null || umount -lR "$p" 2>/dev/null || true; done
  rm -f "$f" "$STATE/run/rootfs"
}

# /usr/local/bin wrappers for the SLURM commands (first on the default PATH): the rootfs's
# command, run by the rootfs's own dynamic loader and libraries, so any user may run it (chroot
# is root's), in the caller's directory and environment. It finds its plugins through slurm.conf's
# PluginDir, a path under the rootfs that also resolves inside it ($CACHE is bound in).
install_wrappers() {
  local r=$1 c f lib=$1/usr/lib/x86_64-linux-gnu
  for f in /usr/local/bin/*; do  # another version's, or a command this one lacks
    c=${f##*/}
    [ -f "$f" ] && grep -q "^$WRAP_MARK" "$f" 2>/dev/null && { [ -x "$r/usr/bin/$c" ] || rm -f "$f"; }
  done
  for c in $SLURM_WRAPPED; do
    [ -x "$r/usr/bin/$c" ] || continue
    # each replaced in one rename: a lab beside this one, its jobs and tests, run these commands
    printf '#!/bin/sh\n%s: SLURM %s from %s\n[ -f %s ] && exec /usr/bin/%s "$@"\nexec %s --library-path %s %s "$@"\n' \
      "$WRAP_MARK" "$(cat "$r$ROOTFS_MARK")" "$r" "$ROOTFS_MARK" "$c" "$lib/ld-linux-x86-64.so.2" \
      "$lib/slurm-wlm:$lib" "$r/usr/bin/$c" >"/usr/local/bin/.$c.slurm-lab"
    chmod 755 "/usr/local/bin/.$c.slurm-lab"
    mv -f "/usr/local/bin/.$c.slurm-lab" "/usr/local/bin/$c"
  done
}

remove_wrappers() {
  local f
  for f in /usr/local/bin/*; do
    [ -f "$f" ] && grep -q "^$WRAP_MARK" "$f" 2>/dev/null && rm -f "$f"
  done
  return 0
}

# What runs a SLURM daemon: nothing (the host's), or `chroot ROOTFS` (the running lab's rootfs).
rootfs_chroot() {
  local r
  r=$(cat "$STATE/run/rootfs" 2>/dev/null || true)
  [ -z "$r" ] || echo "chroot $r"
}

# Pyxis for the rootfs's SLURM: compiled here against the rootfs's own headers (a SPANK plugin
# must match its slurmd's version), installed at the path the host's pyxis.conf names, inside
# the rootfs. enroot is the host's build, bound in by mount_rootfs.
install_rootfs_pyxis() {
  local r=$1 psrc key build
  psrc=$(pyxis_source pyxis)
  key=$(source_key "$psrc")-$(cat "$r$ROOTFS_MARK")
  [ "$(cat "$r/usr/local/lib/slurm/.pyxis-key" 2>/dev/null)" = "$key" ] && return 0
  log "building pyxis for SLURM $(cat "$r$ROOTFS_MARK")"
  build=$CACHE/build-rootfs-pyxis
  unpack_source "$psrc" "$build"
  # only the rootfs's SLURM headers (spank.h, slurm_version.h); the host's own for the rest
  mkdir -p "$build/inc"; ln -s "$r/usr/include/slurm" "$build/inc/slurm"
  (cd "$build" && CPPFLAGS="-I$build/inc" make && make install prefix=/usr/local DESTDIR="$r") \
    >"$CACHE/build-rootfs-pyxis.log" 2>&1 || die "building pyxis for $r failed (see $CACHE/build-rootfs-pyxis.log)"
  rm -rf "$build"
  echo "$key" >"$r/usr/local/lib/slurm/.pyxis-key"
}

# Debian's apptainer in the rootfs (sid only: `up --apptainer`), once; its config as the lab needs
# it: jobs run as root here, and root's default (every capability) is more than the machine grants
# the lab (no CAP_SYS_RESOURCE), so root's containers get the capability file's set instead.
install_rootfs_apptainer() {
  local r=$1 own=
  [ "$(basename "$r" | cut -d- -f2)" = sid ] || return 1  # rootfs-SUITE-KEY
  if [ ! -x "$r/usr/bin/apptainer" ]; then
    log "installing apptainer in $r (Debian sid's, once)"
    mountpoint -q "$r/proc" || { mount -t proc proc "$r/proc"; own=1; }
    DEBIAN_FRONTEND=noninteractive chroot "$r" sh -c \
      "apt-get update -qq && apt-get install -y -qq --no-install-recommends apptainer" >"$CACHE/apptainer.log" 2>&1
    local rc=$?
    [ -z "$own" ] || umount "$r/proc"
    rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/*
    [ "$rc" = 0 ] || return 1
  fi
  sed -i 's/^root default capabilities = .*/root default capabilities = file/' "$r/etc/apptainer/apptainer.conf"
}

# `slurm-lab rootfs [VERSION...]`: build what `up --slurm VERSION` needs ahead of it (CI does it
# in the background, beside pip): the rootfs, and Pyxis in it where the sources are there. The
# rootfs builds run side by side (each mostly waits on the mirror), beside the host's enroot and
# Pyxis build; the host's apt runs first and alone (one apt at a time).
cmd_rootfs() {
  need_root
  local v suite r pyxis= out
  [ $# -gt 0 ] || set -- $(echo "$SLURM_SUITES" | tr ' ' '\n' | grep -v ':host$' | cut -d: -f1)
  for v in "$@"; do
    suite=$(slurm_suite "$v" || true)
    [ -n "$suite" ] || die "rootfs: no SLURM $v here (one of: $(echo "$SLURM_SUITES" | sed 's/:[a-z]*//g'))"
  done
  [ -n "$(pyxis_missing)" ] || pyxis=1
  # shellcheck disable=SC2086
  apt_install debootstrap ${pyxis:+$PYXIS_APT}
  out=$(mktemp -d)
  for v in "$@"; do
    suite=$(slurm_suite "$v" || true)
    [ "$suite" = host ] || build_rootfs "$suite" >"$out/$v" &
  done
  [ -z "$pyxis" ] || install_pyxis
  wait_all || die "a rootfs build failed (see the lines above)"
  for v in "$@"; do
    [ -s "$out/$v" ] || continue
    r=$(cat "$out/$v")
    [ -z "$pyxis" ] || install_rootfs_pyxis "$r"
    [ "$(slurm_suite "$v")" != sid ] || install_rootfs_apptainer "$r" || die "installing apptainer in $r failed (see $CACHE/apptainer.log)"
    echo "$v $r"
  done
  rm -rf "$out"
}

wait_all() {  # every background job of this shell; fails if any did
  local j rc=0
  for j in $(jobs -p); do wait "$j" || rc=1; done
  return $rc
}
