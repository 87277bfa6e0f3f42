# shellcheck shell=bash
# The nodes' local disks (sourced by slurm-lab): one ext4 filesystem with a journal, in a sparse
# file ($STATE.disk) mounted at $STATE/local, made afresh each time the lab starts. Each node's
# /tmp ($STATE/nodes) and enroot's data ($STATE/enroot: the image caches and the containers'
# layers) live there, as on real nodes' local NVMe.
#
# Why not the machine's own filesystem: CI machines run ext4 without a journal, and there ext4
# checks each free inode it considers for a new directory for having been deleted in the last
# few seconds, reading its inode table block to see; after a while of the suite's churn (images
# unpacked, containers and Ray sessions removed) unpacking the lab image (1.4 GB, ~5,000
# directories) took 25-28 CPU-seconds there, and 4 on a fresh journaled filesystem. Without a
# loop device the two are plain directories of $STATE, as before.
LOCAL_DISK=$STATE/local
LOCAL_DISK_FILE=$STATE.disk

mount_local_disk() {
  unmount_local_disk
  mkdir -p "$LOCAL_DISK"
  if ! { truncate -s "${SLURM_LAB_DISK_GB:-64}G" "$LOCAL_DISK_FILE" \
    && mkfs.ext4 -q -F "$LOCAL_DISK_FILE" && mount -o loop "$LOCAL_DISK_FILE" "$LOCAL_DISK"; }; then
    rm -f "$LOCAL_DISK_FILE"
    log "warning: no loop filesystem for the nodes' disks (see above); they are directories of $STATE"
  fi
  mkdir -p "$LOCAL_DISK/nodes" "$LOCAL_DISK/enroot"
  ln -sfn local/nodes "$STATE/nodes"
  ln -sfn local/enroot "$STATE/enroot"
}

unmount_local_disk() {  # the nodes are stopped: nothing of theirs holds it
  node_tmp_unmount_all  # each node's /tmp, mounted on it (slurm-lab-faults.sh)
  if mountpoint -q "$LOCAL_DISK" 2>/dev/null; then
    umount "$LOCAL_DISK" 2>/dev/null || umount -l "$LOCAL_DISK"
  fi
  rm -rf "$LOCAL_DISK" "$STATE/nodes" "$STATE/enroot"
  rm -f "$LOCAL_DISK_FILE"
}
