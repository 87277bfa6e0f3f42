# slurm-rl's per-node image cache for Pyxis (docs/containers.md). Plain shell: it runs on the
# bare node, which may have no python.
#
#   bash -c "$(cat image_cache.sh)" image-cache prepare IMAGE KEY BUDGET_MB META_DIR EVENTS
#   bash -c "$(cat image_cache.sh)" image-cache list META_DIR
#   bash -c "$(cat image_cache.sh)" image-cache prune META_DIR [KEY...]
#
# A prepared image is an enroot container filesystem named pyxis_srl-img-KEY in enroot's own
# data path (where pyxis finds `--container-name=srl-img-KEY`), unpacked once per node per image
# version (KEY: the image's path, size, mtime, ctime and inode). Jobs never write into it: the
# enroot hook (pyxis_overlay_hook.sh) mounts a per-container overlay over it. META_DIR (node
# local) holds per image KEY.lock (held while it is prepared or removed: jobs with other images
# never wait for an unpack), KEY.json (image, bytes, when prepared) and KEY.used (its mtime:
# last use, for LRU eviction beyond BUDGET_MB).
#
# prepare appends image_prepared / image_cached / image_evicted to EVENTS; list and prune print
# one JSON line for this node.
set -u
cmd=$1; shift
node=${SLURMD_NODENAME:-$(hostname)}
PREFIX=pyxis_srl-img-
FRESH_S=600  # an image used this recently may be about to start a container: never evicted

json() {  # a JSON string
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  printf '"%s"' "$(printf '%s' "$s" | tr -d '\000-\037')"
}

# enroot as pyxis runs it: without the job's ENROOT_*_PATH overrides (pyxis drops those)
site_enroot() {
  env -u ENROOT_DATA_PATH -u ENROOT_RUNTIME_PATH -u ENROOT_CACHE_PATH -u ENROOT_TEMP_PATH "$@"
}

# enroot's data path as pyxis' enroot sees it: enroot's own config code
data_path() {
  local enroot
  enroot=$(command -v enroot) || { echo "enroot is not on PATH on $node" >&2; return 1; }
  site_enroot bash -c '
    eval "$(sed -n "/^# -* *BEGIN CONFIG/,/^# -* *END CONFIG/p" "$1")" >/dev/null 2>&1
    printf "%s\n" "${ENROOT_DATA_PATH:?}"' data_path "$enroot"
}

in_use() {  # KEY: a running container (any job's) has its filesystem mounted
  grep -qsE -- "/$PREFIX$1([ ,/]|\$)" /proc/[0-9]*/mountinfo 2>/dev/null
}

bytes_of() {  # KEY
  local b
  b=$(sed -n 's/.*"bytes": *\([0-9]*\).*/\1/p' "$meta/$1.json" 2>/dev/null)
  [ -n "$b" ] || b=$(du -sb "$data/$PREFIX$1" 2>/dev/null | cut -f1)
  echo "${b:-0}"
}

cached_keys() {  # oldest use first
  local d key used
  for d in "$data/$PREFIX"*/; do
    [ -d "$d" ] || continue
    key=${d%/}; key=${key##*/"$PREFIX"}
    case $key in *.tmp) continue;; esac
    used=$(stat -c %Y "$meta/$key.used" 2>/dev/null || echo 0)
    echo "$used $key"
  done | sort -n | cut -d' ' -f2
}

remove() {  # KEY
  site_enroot enroot remove -f "$PREFIX$1" >/dev/null 2>&1 || rm -rf --one-file-system "${data:?}/$PREFIX$1"
  rm -f "$meta/$1.json" "$meta/$1.used"
  [ ! -e "$data/$PREFIX$1" ]
}

event() {  # NAME 'MORE JSON FIELDS'
  printf '{"event": "%s", "host": %s, "t": %s, %s}\n' "$1" "$(json "$node")" \
    "$(date +%s.%N | cut -c1-15)" "$2" >>"$events"
}

declare -A held=()
hold() {  # KEY [-n]: this image's lock (-n: fail at once if another job holds it)
  local fd
  exec {fd}>"$meta/$1.lock" || return 1
  if [ "${2:-}" = -n ]; then flock -n "$fd" || { eval "exec $fd>&-"; return 1; }; else flock -w 1800 "$fd"; fi
  held[$1]=$fd
}

release() {  # KEY: let go of what hold took
  [ -n "${held[$1]:-}" ] && eval "exec ${held[$1]}>&-"
  unset "held[$1]"
}

prepare() {
  local image=$1 key=$2 budget_mb=$3 name t0 bytes secs total key2 b now fs i
  name=$PREFIX$key
  # the copy is per node: on a filesystem the nodes share, nodes would unpack into one another's
  # copy, and evict what another node runs (enroot's default data path is in $HOME)
  fs=$(stat -f -c %T "$data" 2>/dev/null)
  case $fs in nfs* | lustre | gpfs | beegfs | cifs | smb* | ceph | fuse* | 9p | afs | panfs | wekafs)
    echo "slurm-rl: no image cache on $node: enroot's data path $data is on $fs, which the nodes" \
         "share; set ENROOT_DATA_PATH in enroot.conf to node-local disk" >&2
    return 1;;
  esac
  hold "$key" || { echo "slurm-rl: cannot lock $meta/$key.lock on $node" >&2; return 1; }
  t0=$(date +%s.%N)
  if [ -d "$data/$name" ] && { [ -e "$meta/$key.json" ] || in_use "$key"; }; then
    event image_cached "\"key\": \"$key\", \"image\": $(json "$image")"
  else
    # a killed preparation's leftovers go; enroot's own create (unsquashfs), then one rename
    rm -rf --one-file-system "${data:?}/$name.tmp" "${data:?}/$name"
    if ! site_enroot enroot create --name "$name.tmp" "$image" >"$meta/$key.log" 2>&1; then
      echo "slurm-rl: preparing $image on $node failed: $(tail -n 3 "$meta/$key.log" | tr '\n' ' ')" >&2
      rm -rf --one-file-system "${data:?}/$name.tmp"
      return 1
    fi
    mv -T "$data/$name.tmp" "$data/$name" || return 1
    bytes=$(du -sb "$data/$name" | cut -f1)
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b - a}')
    printf '{"image": %s, "bytes": %s, "prepared": %s, "seconds": %s}\n' "$(json "$image")" "$bytes" \
      "$(date +%s)" "$secs" >"$meta/$key.json"
    event image_prepared "\"key\": \"$key\", \"image\": $(json "$image"), \"bytes\": $bytes, \"seconds\": $secs"
  fi
  touch "$meta/$key.used"
  # least recently used first, beyond the budget; never this job's, one in use, or a fresh one
  local -a keys sizes
  mapfile -t keys < <(cached_keys)
  total=0
  for key2 in "${keys[@]}"; do sizes+=("$(bytes_of "$key2")"); total=$((total + sizes[-1])); done
  now=$(date +%s)
  for i in "${!keys[@]}"; do
    key2=${keys[i]} b=${sizes[i]}
    [ "$total" -le $((budget_mb * 1048576)) ] && break
    [ "$key2" = "$key" ] && continue
    [ $((now - $(stat -c %Y "$meta/$key2.used" 2>/dev/null || echo 0))) -lt $FRESH_S ] && continue
    in_use "$key2" && continue
    hold "$key2" -n || continue  # being prepared, or removed, by another job right now
    remove "$key2" && total=$((total - b)) \
      && event image_evicted "\"key\": \"$key2\", \"bytes\": $b, \"budget_mb\": $budget_mb"
    release "$key2"
  done
  return 0
}

list() {
  local key items="" used image
  for key in $(cached_keys); do
    used=$(stat -c %Y "$meta/$key.used" 2>/dev/null || echo null)
    image=$(sed -n 's/.*"image": *\("[^"]*"\).*/\1/p' "$meta/$key.json" 2>/dev/null)
    items="$items${items:+, }{\"key\": \"$key\", \"image\": ${image:-null}, \"bytes\": $(bytes_of "$key"), \"last_used\": $used, \"in_use\": $(in_use "$key" && echo true || echo false)}"
  done
  printf '{"node": %s, "data_path": %s, "images": [%s]}\n' "$(json "$node")" "$(json "$data")" "$items"
}

prune() {  # [KEY...]: those (default: all) that no running container uses nor a job prepares
  local key removed="" kept="" freed=0 b
  for key in $(cached_keys); do
    if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qxF -- "$key"; then continue; fi
    if in_use "$key" || ! hold "$key" -n; then kept="$kept${kept:+, }\"$key\""; continue; fi
    b=$(bytes_of "$key")
    remove "$key" && { removed="$removed${removed:+, }\"$key\""; freed=$((freed + b)); }
    release "$key"
  done
  printf '{"node": %s, "removed": [%s], "in_use": [%s], "freed_bytes": %s}\n' "$(json "$node")" "$removed" "$kept" "$freed"
}

case $cmd in
  prepare) meta=$4 events=$5 ;;
  list | prune) meta=$1; shift ;;
  *) echo "usage: image-cache prepare|list|prune ..." >&2; exit 2 ;;
esac
data=$(data_path) || exit 1
# Per user, as enroot's data path is (a site sets it per user: an image another user prepared is
# never run from here): META_DIR-UID, this user's own, mode 0700; one somebody else made is refused.
meta=$meta-$(id -u)
(umask 077 && mkdir -p "$meta") || exit 1
[ -O "$meta" ] && [ ! -L "$meta" ] || { echo "image cache: $meta is not this user's ($(id -un)): remove it as root" >&2; exit 1; }
case $cmd in
  prepare) prepare "$1" "$2" "$3" ;;
  list) list ;;
  prune) prune "$@" ;;
esac
