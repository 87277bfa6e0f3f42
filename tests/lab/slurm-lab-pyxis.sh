# Sourced by slurm-lab: NVIDIA Pyxis + enroot in the lab, built from source, and the lab's image.
#
# Sources: $SLURM_LAB_PYXIS_SRC / $SLURM_LAB_ENROOT_SRC (a source dir or a .tar.gz each), else
# pyxis-*.tar.gz and enroot-*.tar.gz in $SLURM_LAB_VENDOR (default: ../shared/vendor beside the
# checkout). Builds are cached in $CACHE and reused while their inputs are unchanged.
#
# Per node and per user, enroot keeps its runtime files, cache and container root filesystems in
# $STATE/enroot/<hostname>/{runtime,cache,data}/user-<uid> (not under the /tmp bind: `enroot list`
# reads the mount table, where a bind shows its source, and pyxis would never find a running
# container). Each user's dirs are made by the lab, theirs alone (0700), below root's: as a site
# makes /run/user/<uid>, so no user can plant another's (enroot_user_dirs in slurm-lab-users.sh).
#
# The image (debootstrap minbase + Debian's python3) carries its own environment at
# /opt/slurm-rl, a path the bare nodes lack, with slurm-rl and the dependency closure copied from
# the interpreter that runs the tests: anything slurm-rl still runs outside the container fails.

CACHE=${SLURM_LAB_CACHE:-/var/cache/slurm-lab}
IMAGE=$CACHE/images/slurm-rl-lab.sqsh
SANDBOX_IMAGE=$CACHE/images/sandbox.sqsh
SANDBOX_KEY=base-nodev  # what the sandbox image was sealed as: a new value rebuilds it
IMAGE_PYTHON=/opt/slurm-rl/bin/python
PYXIS_CONF=$CONF_DIR/plugstack.conf.d/pyxis.conf
# enroot's config dir: the machine's for the first lab; a lab beside it (its nodes in a rootfs)
# gets a copy of its own, bound over it in its nodes' root (mount_rootfs), its state its own
HOST_ENROOT_ETC=/usr/local/etc/enroot
ENROOT_ETC=$HOST_ENROOT_ETC
[ -z "$LAB_NAME" ] || ENROOT_ETC=$STATE/enroot-etc
ENROOT_CONF=$ENROOT_ETC/enroot.conf.d/slurm-lab.conf
PYXIS_APT="build-essential libslurm-dev libbsd-dev squashfs-tools debootstrap makeself zstd pigz jq bsdextrautils squashfuse"
# Debian's mirror apt already uses (the lab reaches no other host)
MIRROR=$(awk '/^URIs:/{print $2; exit} /^deb /{print $2; exit}' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null || true)
MIRROR=${MIRROR:-http://deb.debian.org/debian}

pyxis_source() {  # $1: pyxis|enroot -> a source dir or tarball, or nothing
  local name=$1 var vendor top f
  var=SLURM_LAB_$(echo "$name" | tr a-z A-Z)_SRC
  if [ -n "${!var:-}" ]; then echo "${!var}"; return; fi
  top=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null || (cd "$SCRIPT_DIR/../.." && pwd))
  vendor=${SLURM_LAB_VENDOR:-$top/../shared/vendor}
  for f in "$vendor/$name"-*.tar.gz; do [ -e "$f" ] && { echo "$f"; return; }; done
}

# Why Pyxis cannot be set up here (empty when it can): the container tests print this when skipping.
pyxis_missing() {
  local p e
  p=$(pyxis_source pyxis); e=$(pyxis_source enroot)
  [ -n "$p" ] && [ -n "$e" ] && return 0
  echo "no Pyxis/enroot sources: set SLURM_LAB_PYXIS_SRC and SLURM_LAB_ENROOT_SRC (a source dir or .tar.gz each) or SLURM_LAB_VENDOR (a folder with pyxis-*.tar.gz and enroot-*.tar.gz)"
}

unpack_source() {  # $1: dir or tarball, $2: destination dir
  rm -rf "$2"; mkdir -p "$2"
  if [ -d "$1" ]; then cp -a "$1/." "$2/"; else tar -xzf "$1" -C "$2" --strip-components=1; fi
}

source_key() {  # a content hash of a source dir or tarball
  if [ -d "$1" ]; then (cd "$1" && find . -type f -not -path './.git/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
  else sha256sum <"$1" | cut -c1-16; fi
}

apt_install() {
  local missing=() pkg
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} = 0 ] && return 0
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${missing[@]}" >/dev/null
}

install_pyxis() {
  local psrc esrc key build
  psrc=$(pyxis_source pyxis); esrc=$(pyxis_source enroot)
  # shellcheck disable=SC2086
  apt_install $PYXIS_APT
  key=$(source_key "$psrc")-$(source_key "$esrc")
  if [ "$(cat "$CACHE/pyxis-installed" 2>/dev/null)" = "$key" ] && command -v enroot >/dev/null \
     && [ -f /usr/local/lib/slurm/spank_pyxis.so ]; then
    return 0
  fi
  log "building enroot and pyxis from $esrc and $psrc"
  build=$CACHE/build
  unpack_source "$esrc" "$build/enroot"
  unpack_source "$psrc" "$build/pyxis"
  # enroot without its git submodules: glibc instead of musl, Debian's makeself and kernel
  # headers, the in-tree libbsd subset; bookworm's glibc lacks strlcpy (libbsd has it).
  local eflags=(FORCE_GLIBC=1 prefix=/usr/local "CPPFLAGS=-D_GNU_SOURCE=1 -include bsd/string.h"
                "LDLIBS=-l:libbsd.a -l:libbsd.so.0")
  (
    set -e
    cd "$build/enroot"
    make -C deps libbsd FORCE_GLIBC=1
    mkdir -p deps/dist/makeself/bin deps/makeself deps/linux-headers
    printf '#!/bin/sh\nexec /usr/bin/makeself "$@"\n' >deps/dist/makeself/bin/enroot-makeself
    chmod +x deps/dist/makeself/bin/enroot-makeself
    touch deps/makeself/.stamp deps/linux-headers/.stamp
    make "${eflags[@]}"
    make install "${eflags[@]}"
    cd "$build/pyxis"
    make
    make install prefix=/usr/local
  ) >"$CACHE/build.log" 2>&1 || die "building enroot/pyxis failed (see $CACHE/build.log)"
  rm -rf "$build"
  echo "$key" >"$CACHE/pyxis-installed"
}

# Enable (or, with no scope, disable) the plugin for the lab's slurmds; they load it at start.
# $2 non-empty: use_squashfuse=1 (unnamed containers start from the mounted squashfs, no unpack).
configure_pyxis() {
  local scope=${1:-}
  mkdir -p "$(dirname "$PYXIS_CONF")"
  if [ -z "$scope" ]; then
    rm -f "$PYXIS_CONF" "$ENROOT_CONF"
    [ -z "$LAB_NAME" ] || rm -rf "$ENROOT_ETC" "$CONF_DIR/plugstack.conf"
    return 0
  fi
  if [ -n "$LAB_NAME" ]; then  # its own plugin stack (SLURM reads plugstack.conf beside slurm.conf) and enroot config
    echo "include $CONF_DIR/plugstack.conf.d/*.conf" >"$CONF_DIR/plugstack.conf"
    rm -rf "$ENROOT_ETC"; mkdir -p "$ENROOT_ETC"; cp -a "$HOST_ENROOT_ETC/." "$ENROOT_ETC/"
  fi
  # on a newer SLURM ($rootfs, set by `up`): its own build, by a path valid inside the rootfs and out
  echo "required ${rootfs:-}/usr/local/lib/slurm/spank_pyxis.so runtime_path=/tmp/pyxis container_scope=$scope${2:+ use_squashfuse=1}" >"$PYXIS_CONF"
  mkdir -p "$(dirname "$ENROOT_CONF")" "$STATE/enroot"
  cat >"$ENROOT_CONF" <<EOF
# managed by slurm-lab: per-node enroot state (each lab node has its own /tmp and hostname)
ENROOT_RUNTIME_PATH $STATE/enroot/\$(hostname)/runtime/user-\$(id -u)
ENROOT_CACHE_PATH $STATE/enroot/\$(hostname)/cache/user-\$(id -u)
ENROOT_TEMP_PATH /tmp
ENROOT_DATA_PATH $STATE/enroot/\$(hostname)/data/user-\$(id -u)
EOF
}

# The inputs of the image: the recipe (this file), the environment's file list and versions, and
# slurm-rl's own files. The image is rebuilt when any of them changes.
image_key() {  # also leaves the environment's file list in $CACHE/image-files.txt
  local py=$1 top=$2
  mkdir -p "$CACHE"
  "$py" "$SCRIPT_DIR/image_files.py" slurm-rl >"$CACHE/image-files.txt"
  {
    md5sum <"${BASH_SOURCE[0]}"
    cat "$CACHE/image-files.txt"
    (cd "$top" && find slurm_rl templates -type f -not -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum)
  } | sha256sum | cut -c1-16
}

# One build at a time (two tests, or `up` and a test, may ask at once; a second waits, then finds
# the image current). The wait is bounded and names the holder, which writes itself into the lock
# file once it holds it (waiters open it without truncating).
locked() {  # $1: lock file, $2...: the command, run holding it
  local lock=$1; shift
  (
    flock -w 900 9 || die "waited 900 s for $lock: held by $(cat "$lock" 2>/dev/null || echo 'nobody that said so')"
    echo "pid $BASHPID ($(tr '\0' ' ' </proc/$PPID/cmdline | cut -c1-120)) since $(date +%T)" >"$lock"
    "$@"
  ) 9>>"$lock"
}

cmd_image() {
  need_root
  mkdir -p "$CACHE"
  locked "$CACHE/image.lock" build_image
}

build_image() {
  local py=${SLURM_LAB_PYTHON:-python3} top key base site=/opt/slurm-rl/lib/python3.11/site-packages
  top=$(cd "$SCRIPT_DIR/../.." && pwd)
  "$py" -c 'import slurm_rl, ray, torch' 2>/dev/null \
    || die "$py cannot import slurm_rl, ray and torch: run from the project's venv (or set SLURM_LAB_PYTHON)"
  # shellcheck disable=SC2086
  apt_install $PYXIS_APT
  key=$(image_key "$py" "$top")
  base=$CACHE/base-bookworm-python3
  if [ -f "$IMAGE" ] && [ "$(cat "$IMAGE.key" 2>/dev/null)" = "$key" ]; then
    sandbox_image "$base"; echo "$IMAGE"; return 0
  fi
  if [ ! -x "$base/usr/bin/python3" ] || [ ! -x "$base$IMAGE_PYTHON" ]; then
    log "building the base image (debootstrap from $MIRROR; about a minute)"
    rm -rf "$base"
    debootstrap --variant=minbase --include=python3,python3-venv bookworm "$base" "$MIRROR" \
      >"$CACHE/debootstrap.log" 2>&1 || die "debootstrap failed (see $CACHE/debootstrap.log)"
    rm -rf "$base"/var/cache/apt/archives/*.deb "$base"/var/lib/apt/lists/*
    chroot "$base" python3 -m venv --without-pip /opt/slurm-rl
  fi
  sandbox_image "$base"
  # the dependencies' rootfs, kept while the recipe and the environment's files (their names,
  # which carry each distribution's version; not the directory they sit in, which a fresh
  # clone's venv changes) are the same: a build then only adds slurm-rl and seals
  local deps=$CACHE/image-deps-rootfs deps_key
  deps_key=$({ md5sum <"${BASH_SOURCE[0]}"; cut -f2 "$CACHE/image-files.txt"; } | sha256sum | cut -c1-16)
  if [ "$(cat "$deps.key" 2>/dev/null)" != "$deps_key" ]; then
    log "building the lab image's dependencies ($deps)"
    rm -rf "$deps" "$deps.key" "$CACHE/image-rootfs"  # (image-rootfs: what older builds left)
    cp -a "$base" "$deps"
    cut -f1 "$CACHE/image-files.txt" | sort -u | while read -r from; do
      awk -F'\t' -v s="$from" '$1==s{print $2}' "$CACHE/image-files.txt" | tar -C "$from" -cf - -T - | tar -C "$deps$site" -xf -
    done
    chroot "$deps" "$IMAGE_PYTHON" -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
    # the console scripts an image's environment has (pip writes them; the copy above does not):
    # `ray` beside the interpreter, as in a real RL image's venv
    printf '#!%s\nimport sys\nfrom ray.scripts.scripts import main\nsys.exit(main())\n' "$IMAGE_PYTHON" \
      >"$deps/opt/slurm-rl/bin/ray"
    chmod 755 "$deps/opt/slurm-rl/bin/ray"
    echo "$deps_key" >"$deps.key"
  fi
  log "building the lab image $IMAGE"
  seal_with_slurm_rl "$deps" "$site" "$IMAGE_PYTHON" "slurm_rl.job.node, ray, torch" \
    "$IMAGE" "$key"
}

sandbox_image() {  # BASE: a second image, without slurm-rl (bash, python3, util-linux), sealed
  # once per base: what a job of parts' sandbox runs in (tests/lab/experiments/parts)
  if [ -x "$1/usr/bin/python3" ] && { [ ! -f "$SANDBOX_IMAGE" ] || [ "$1" -nt "$SANDBOX_IMAGE" ] \
    || [ "$(cat "$SANDBOX_IMAGE.key" 2>/dev/null)" != "$SANDBOX_KEY" ]; }; then
    log "building the sandbox image $SANDBOX_IMAGE"
    seal_image "$1" "$SANDBOX_IMAGE" "$SANDBOX_KEY"
  fi
}

# DEPS SITE PY IMPORTS IMAGE KEY: the dependencies' rootfs DEPS with the checkout's slurm-rl in its
# site-packages SITE (a path inside DEPS), compiled and checked by the rootfs' PY (it imports
# IMPORTS), sealed as IMAGE; then slurm-rl comes out again, and DEPS is as it was.
seal_with_slurm_rl() {
  local deps=$1 site=$1$2 top
  top=$(cd "$SCRIPT_DIR/../.." && pwd)
  rm -rf "$site/slurm_rl"  # what a build that was stopped left
  copy_slurm_rl "$top" "$site"
  chroot "$deps" "$3" -m compileall -q "$2/slurm_rl" >/dev/null 2>&1 || true
  if ! chroot "$deps" "$3" -c "import $4"; then
    rm -rf "$site/slurm_rl"; die "the image's python cannot import $4"
  fi
  seal_image "$deps" "$5" "$6"
  rm -rf "$site/slurm_rl"
  echo "$5"
}

# /dev's contents stay out, as in an image `enroot import` makes: an unprivileged unsquashfs cannot
# create device nodes and fails the whole unpack ("because you're not superuser!"); the runtime
# mounts /dev itself.
seal_image() {  # ROOTFS IMAGE KEY: ROOTFS as the squashfs IMAGE (its inputs' KEY beside it)
  mkdir -p "$(dirname "$2")"
  mksquashfs "$1" "$2.tmp" -comp zstd -Xcompression-level 1 -all-root -noappend -quiet -no-progress \
    -wildcards -e 'dev/*' >/dev/null \
    || die "mksquashfs failed"
  mv "$2.tmp" "$2"; echo "$3" >"$2.key"
}

copy_slurm_rl() {  # TOP SITE: the checkout's slurm-rl (package and templates) into site-packages
  cp -a "$1/slurm_rl" "$2/slurm_rl"
  cp -a "$1/templates" "$2/slurm_rl/templates"
  find "$2/slurm_rl" -name __pycache__ -prune -exec rm -rf {} +
}

# The NeMo Gym image: the lab image's base plus the environment tests/lab/gym-venv built (Gym
# needs Python >= 3.12; the lab image's Debian python is 3.11) and that environment's own
# interpreter, both at the paths they have here (the venv's scripts and pyvenv.cfg name them),
# with slurm-rl copied in instead of the .pth that points at a checkout. Rebuilt when the
# environment, the interpreter, slurm-rl or this recipe change.
GYM_IMAGE=$CACHE/images/slurm-rl-gym.sqsh
GYM_VENV_DIR=${GYM_VENV:-$CACHE/gym-venv}

cmd_gym_image() {
  need_root
  mkdir -p "$CACHE"
  [ -x "$CACHE/base-bookworm-python3/usr/bin/python3" ] || cmd_image >/dev/null
  locked "$CACHE/gym-image.lock" build_gym_image
}

build_gym_image() {
  local top py home key deps deps_key purelib
  top=$(cd "$SCRIPT_DIR/../.." && pwd)
  py=$GYM_VENV_DIR/bin/python
  "$py" -c 'import nemo_gym, ray' 2>/dev/null || die "no Gym environment at $GYM_VENV_DIR: build it with tests/lab/gym-venv"
  home=$("$py" -c 'import sys; print(sys.base_prefix)')
  case $home in /usr | /usr/local) die "$GYM_VENV_DIR runs the system's Python ($home): build it from a self-contained one (pyenv, uv python)";; esac
  deps_key=$({ md5sum <"${BASH_SOURCE[0]}"; cat "$GYM_VENV_DIR/.inputs" 2>/dev/null; echo "$home"; } | sha256sum | cut -c1-16)
  key=$({
    echo "$deps_key"
    (cd "$top" && find slurm_rl templates -type f -not -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum)
  } | sha256sum | cut -c1-16)
  if [ -f "$GYM_IMAGE" ] && [ "$(cat "$GYM_IMAGE.key" 2>/dev/null)" = "$key" ]; then echo "$GYM_IMAGE"; return 0; fi
  purelib=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  # the dependencies' rootfs (the interpreter and the venv), kept while they are the same
  deps=$CACHE/gym-image-deps-rootfs
  if [ "$(cat "$deps.key" 2>/dev/null)" != "$deps_key" ]; then
    log "building the Gym image's dependencies ($deps)"
    rm -rf "$deps" "$deps.key" "$CACHE/gym-image-rootfs"  # (gym-image-rootfs: what older builds left)
    cp -a "$CACHE/base-bookworm-python3" "$deps"
    mkdir -p "$deps$home" "$deps$GYM_VENV_DIR"
    # the interpreter without its own site-packages (the venv does not see them) and test suite
    tar -C "$home" --exclude='./lib/python3*/site-packages/*' --exclude='./lib/python3*/test' -cf - . | tar -C "$deps$home" -xf -
    tar -C "$GYM_VENV_DIR" -cf - . | tar -C "$deps$GYM_VENV_DIR" -xf -
    rm -f "$deps$purelib/slurm_rl_checkout.pth"
    echo "$deps_key" >"$deps.key"
  fi
  log "building the Gym image $GYM_IMAGE (Python $("$py" -c 'import platform; print(platform.python_version())'))"
  seal_with_slurm_rl "$deps" "$purelib" "$py" "nemo_gym, ray, slurm_rl.job.node" "$GYM_IMAGE" "$key"
}
