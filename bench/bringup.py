"""Bring-up benchmark on the lab: slurm-rl vs a naive one-srun `ray start` script, same run.

    python bench/bringup.py [--repeat 2]

For 1 and 3 nodes it reports, from the job dir's events.jsonl alone: launch (node bootstrap
started) -> all nodes up -> driver connected, and the whole job (sbatch to `--wait` return).
The baseline is the raw-Ray recipe: one srun, node 0 `ray start --head --block`, the others
`ray start --address` once the GCS port answers, a driver polling `ray.nodes()` until all are
alive. Not a test and not a CI gate: it prints numbers and ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _lab import REPO, submit

BASELINE = r"""#!/bin/bash
#SBATCH --cpus-per-task=1
#SBATCH --partition=lab
OUT={out}
export RAY_AUTH_MODE=disabled  # the classic recipe, no token (Ray 2.60 would pick up ~/.ray/auth_token)
PORT=$((20000 + SLURM_JOB_ID % 5000))
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1)
HEAD_IP=$(getent hosts "$HEAD" | awk '{{print $1}}')
echo "launch $(date +%s.%N)" >> $OUT
srun --ntasks-per-node=1 bash -c '
  T=/tmp/raw-$SLURM_JOB_ID
  if [ "$SLURM_NODEID" = 0 ]; then
    exec ray start --head --block --port='$PORT' --num-cpus=1 --temp-dir=$T --include-dashboard=false \\
      --disable-usage-stats
  else
    until (exec 3<>/dev/tcp/'$HEAD_IP'/'$PORT') 2>/dev/null; do sleep 0.1; done
    exec ray start --block --address='$HEAD_IP':'$PORT' --num-cpus=1 --temp-dir=$T --disable-usage-stats
  fi' > /dev/null 2>&1 &
SRUN=$!
srun --overlap -N1 -n1 -w "$HEAD" {python} -c '
import sys, time, ray
n = int(sys.argv[1]); addr = sys.argv[2]; out = sys.argv[3]
while True:
    try:
        ray.init(address=addr); break
    except Exception:
        time.sleep(0.2)
open(out, "a").write(f"connected {{time.time()}}\n")
while len([x for x in ray.nodes() if x["Alive"]]) < n:
    time.sleep(0.1)
open(out, "a").write(f"all_up {{time.time()}}\n")
' "$SLURM_NNODES" "$HEAD_IP:$PORT" "$OUT"
kill $SRUN; wait
"""

# The raw recipe leaves its Ray daemons behind (they leave the step's process tree): the
# benchmark removes them itself, by their temp dir, so that runs do not disturb each other.
CLEAN_RAW = (
    "import glob; from slurm_rl.core.procs import stop_job_processes as s; "
    "[s('-', d, 0.3) for d in glob.glob('/tmp/raw-*')]"
)


def clean_raw_leftovers(nodes: int) -> None:
    subprocess.run(
        ["srun", "-N", str(nodes), "--ntasks-per-node=1", "--oversubscribe", sys.executable, "-c", CLEAN_RAW],
        capture_output=True,
        timeout=120,
        check=False,
    )


def run_baseline(nodes: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        out = Path(d) / "times.txt"
        script = Path(d) / "raw.sh"
        script.write_text(BASELINE.format(out=out, python=sys.executable))
        t0 = time.time()
        subprocess.run(
            ["sbatch", "--wait", "-N", str(nodes), "-o", str(Path(d) / "log.txt"), str(script)],
            check=True,
            capture_output=True,
            timeout=300,
        )
        wall = time.time() - t0
        clean_raw_leftovers(nodes)
        marks = dict(line.split() for line in out.read_text().splitlines())
        launch = float(marks["launch"])
        return {
            "all_up": float(marks["all_up"]) - launch,
            "connected": max(float(marks["connected"]), float(marks["all_up"])) - launch,
            "wall": wall,
        }


def run_slurm_rl(nodes: int) -> dict[str, float]:
    t0 = time.time()
    res = submit(REPO / "bench" / "noop.py", nodes, "--wait", "--name", f"bench-{nodes}", timeout=300)
    wall = time.time() - t0
    if res.returncode != 0:
        raise SystemExit(f"slurm-rl job failed: {res.stdout} {res.stderr}")
    job_dir = Path(json.loads(res.stdout.splitlines()[-1])["job_dir"])
    events = [json.loads(line) for line in (job_dir / "events.jsonl").read_text().splitlines()]
    first = {}
    for e in events:
        first.setdefault(e["event"], e["t"])
    launch = min(e["t"] for e in events if e["event"] == "node_start")
    all_up = max(e["t"] for e in events if e["event"] == "node_up")
    return {
        "all_up": all_up - launch,
        "connected": first["driver_connected"] - launch,
        "wall": wall,
        "job": first["job_end"] - first["submitted"],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    rows = {}
    for nodes in (1, 3):
        for name, fn in (("raw ray start", run_baseline), ("slurm-rl", run_slurm_rl)):
            samples = [fn(nodes) for _ in range(args.repeat)]
            rows[(name, nodes)] = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    print(f"{'':16s} {'nodes':>5s} {'all nodes up':>13s} {'driver conn.':>13s} {'job wall':>9s}")
    for (name, nodes), r in rows.items():
        print(f"{name:16s} {nodes:5d} {r['all_up']:12.2f}s {r['connected']:12.2f}s {r['wall']:8.2f}s")
    for name in ("raw ray start", "slurm-rl"):
        ratio = rows[(name, 3)]["all_up"] / rows[(name, 1)]["all_up"]
        print(f"{name}: 3-node / 1-node bring-up = {ratio:.2f}x")
    for nodes in (1, 3):
        r = rows[("slurm-rl", nodes)]["all_up"] / rows[("raw ray start", nodes)]["all_up"]
        print(
            f"slurm-rl / raw, {nodes} node(s), all nodes up: {r:.2f}x; no-op job: "
            f"{rows[('slurm-rl', nodes)]['job']:.1f}s from the job dir (submitted -> batch script's end), "
            f"{rows[('slurm-rl', nodes)]['wall']:.1f}s as `submit --wait` sees it"
        )


if __name__ == "__main__":
    main()
