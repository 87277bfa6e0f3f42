#!/bin/bash
# slurm-rl's enroot hook (docs/containers.md): a container started from a prepared image
# (pyxis_srl-img-KEY, see image_cache.sh) gets its own copy-on-write layer, so that what the job
# writes inside it never reaches the shared prepared copy, nor another job. enroot runs it in
# the container's own mount namespace before switching root (ENROOT_CONFIG_PATH points the job's
# step at it); the layer, a tmpfs, goes with that namespace: nothing is left to clean up.
set -eu
case ${ENROOT_ROOTFS##*/} in pyxis_srl-img-*) ;; *) exit 0;; esac
layer=$ENROOT_RUNTIME_PATH/slurm-rl-layer
mkdir -p "$layer"
# enroot's own mount helper, as its hooks use: util-linux's `mount` run by a user in enroot's user
# namespace (uid kept, gid unmapped) refuses with "drop permissions failed" before trying
enroot-mount - <<<"slurm-rl-layer $layer tmpfs mode=755"
mkdir -p "$layer/upper" "$layer/work"
opts="lowerdir=$ENROOT_ROOTFS,upperdir=$layer/upper,workdir=$layer/work"
# as root on the node: plain overlayfs; unprivileged, in enroot's user namespace: userxattr
if ! enroot-mount - <<<"slurm-rl-overlay $ENROOT_ROOTFS overlay $opts" 2>/dev/null \
   && ! enroot-mount - <<<"slurm-rl-overlay $ENROOT_ROOTFS overlay $opts,userxattr"; then
  echo "slurm-rl: cannot mount a per-job overlay over the cached image $ENROOT_ROOTFS on $(hostname)" \
       "(overlayfs in a user namespace needs Linux >= 5.11); set \"image_cache\": false in the spec" >&2
  exit 1
fi
# The overlay hides what enroot mounted into the root filesystem before the hooks (/proc, /dev,
# /sys, the site's mounts.d): enroot mounts this file's lines after the hooks, so they go again.
if [ -f "${ENROOT_MOUNTS}~" ]; then
  awk 'NF >= 4 && $1 !~ /^#/ { $5 = 0; $6 = 0; print }' "${ENROOT_MOUNTS}~" >>"$ENROOT_MOUNTS"
fi
