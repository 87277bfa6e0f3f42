# Sourced by slurm-lab: SLURM accounting as sites run it. slurmdbd (Debian's package) over a real
# MariaDB, and slurmctld enforcing associations, limits and QOS: a job (or an srun slurm-rl
# starts on its behalf) without a valid account/QOS is refused, as at a real site.
#
# What `up` creates (idempotently, on every fresh start; `down` removes it with the state):
#   MariaDB     its own server: data and socket in $STATE/mariadb, 127.0.0.1:$DB_PORT
#   slurmdbd    /etc/slurm/slurmdbd.conf, listening on the bridge ($HOST_IP:$DBD_PORT)
#   accounts    lab (everyone's default) and rl; QOS normal (default), high, small (one node
#               per job at most, refused at submit beyond) and short (10 minutes per job; a
#               longer one pends forever); root and the lab's users (slurm-lab-users.sh) in both
#   partition   labqos over all nodes: AllowQos=high, so a job there needs --qos=high
# Node features (for --constraint) are written by slurm-lab's config: rackA on odd nodes, rackB
# on even ones, and lab on all.

DB_PORT=${SLURM_LAB_DB_PORT:-33061}
DBD_PORT=${SLURM_LAB_DBD_PORT:-6819}
DBD_CONF=$CONF_DIR/slurmdbd.conf
DB_DIR=$STATE/mariadb  # data/ and run/, the mysql user's
DB_SOCKET=$DB_DIR/run/mariadb.sock
DB_PID=$DB_DIR/run/mariadb.pid
DB_PASS=slurm-lab-db  # a lab-only database on 127.0.0.1; the file holding it is root's, mode 600
ACCOUNTING_APT="mariadb-server slurmdbd"
LAB_ACCOUNTS="lab rl"

# The slurm.conf lines of an accounting lab (empty without accounting).
accounting_config() {
  [ "${1:-}" = 1 ] || return 0
  cat <<EOF
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$HOST_IP
AccountingStoragePort=$DBD_PORT
AccountingStorageEnforce=associations,limits,qos,safe
# refuse at submit what a partition never allows (its AllowQos, sizes, time) instead of pending forever
EnforcePartLimits=ALL
JobAcctGatherType=jobacct_gather/linux
# a sample every 2 s (default 30): the lab's jobs are short, and MaxRSS comes from the samples
JobAcctGatherFrequency=task=2
EOF
}

start_mariadb() {
  local data=$DB_DIR/data
  if [ ! -d "$data/mysql" ]; then
    rm -rf "$DB_DIR"; mkdir -p "$data" "$DB_DIR/run"; chown -R mysql:mysql "$DB_DIR"
    mariadb-install-db --user=mysql --datadir="$data" --auth-root-authentication-method=socket \
      --skip-test-db >"$STATE/log/mariadb-install.log" 2>&1 \
      || die "mariadb-install-db failed (see $STATE/log/mariadb-install.log)"
  fi
  kill_pidfile "$DB_PID" mariadbd
  # started detached, like the other lab daemons; `down` (or a fresh `up`) stops it by pid file
  setsid mariadbd --user=mysql --datadir="$data" --socket="$DB_SOCKET" --pid-file="$DB_PID" \
    --bind-address=127.0.0.1 --port="$DB_PORT" --log-error="$DB_DIR/mariadb.log" \
    --innodb-buffer-pool-size=32M --innodb-log-file-size=16M --performance-schema=OFF \
    </dev/null >/dev/null 2>&1 &
  for _ in $(seq 150); do
    mariadb --socket="$DB_SOCKET" -u root -e 'SELECT 1' >/dev/null 2>&1 && break
    sleep 0.2
  done
  mariadb --socket="$DB_SOCKET" -u root -e 'SELECT 1' >/dev/null 2>&1 \
    || die "MariaDB did not start (see $DB_DIR/mariadb.log)"
  mariadb --socket="$DB_SOCKET" -u root <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
SQL
}

start_slurmdbd() {
  (umask 077; cat >"$DBD_CONF" <<EOF
$MARK: do not edit, \`slurm-lab down\` removes it
AuthType=auth/munge
DbdHost=$(hostname)
DbdAddr=$HOST_IP
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$STATE/run/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
  )
  kill_pidfile "$STATE/run/slurmdbd.pid" slurmdbd
  $(rootfs_chroot) slurmdbd
  for _ in $(seq 150); do
    sacctmgr -n -P show cluster >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "slurmdbd did not answer (see $STATE/log/slurmdbd.log)"
}

# Cluster, accounts, QOS and associations; run before slurmctld registers (sacctmgr -i: no prompts;
# adding what exists is a no-op).
create_associations() {
  local cluster=$1 user
  sacctmgr -i add cluster "$cluster" >/dev/null 2>&1 || true
  sacctmgr -i add qos high Priority=100 >/dev/null 2>&1 || true
  # DenyOnLimit: a job over the limit is refused at submit instead of pending forever
  sacctmgr -i add qos small MaxTRESPerJob=node=1 Flags=DenyOnLimit >/dev/null 2>&1 || true
  # without DenyOnLimit: a longer job would pend forever (QOSMaxWallDurationPerJobLimit)
  sacctmgr -i add qos short MaxWall=00:10:00 >/dev/null 2>&1 || true
  for a in $LAB_ACCOUNTS; do
    sacctmgr -i add account "$a" Cluster="$cluster" Description="slurm-lab $a" Organization=lab >/dev/null 2>&1 || true
  done
  for user in root $(lab_user_names); do  # slurm-lab-users.sh made them
    sacctmgr -i add user "$user" Account="${LAB_ACCOUNTS// /,}" DefaultAccount=lab Cluster="$cluster" >/dev/null 2>&1 || true
    sacctmgr -i modify user "$user" set QOS=normal,high,small,short DefaultQOS=normal >/dev/null 2>&1 || true
  done
  sacctmgr -n -P show assoc user=root format=account | grep -qx lab \
    || die "sacctmgr could not create the lab's associations (see $STATE/log/slurmdbd.log)"
}

# $1: 1 to run accounting, else stop whatever a previous lab left of it.
setup_accounting() {
  if [ "${1:-}" != 1 ]; then stop_accounting; rm -f "$DBD_CONF"; return 0; fi
  if ! dpkg -s $ACCOUNTING_APT >/dev/null 2>&1; then
    # the packages' scripts would start the system's MariaDB and slurmdbd: the lab runs its own
    local policy=/usr/sbin/policy-rc.d made=0
    [ -e "$policy" ] || { printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 755 "$policy"; made=1; }
    # shellcheck disable=SC2086
    apt_install $ACCOUNTING_APT
    [ "$made" = 0 ] || rm -f "$policy"
  fi
  start_mariadb
  start_slurmdbd
  create_associations "$CLUSTER_NAME"
}

stop_accounting() {
  kill_pidfile "$STATE/run/slurmdbd.pid" slurmdbd
  kill_pidfile "$DB_PID" mariadbd
  # ones no pid file names any more (an `up` racing a `down`, or killed before the daemon wrote
  # it): the lab's, by the command line the lab starts them with
  pkill -KILL -f "^(/usr/sbin/)?mariadbd .*--datadir=$STATE/mariadb/" 2>/dev/null || true
  kill_own_daemons slurmdbd
}
