"""Scale on the lab: bring-up and driver start at 1, 3, 6 and 12 nodes in one run, with the
SLURM RPCs each job costs, and what one Ray node costs (CPU seconds, RSS). Writes a PNG.

    tests/lab/slurm-lab up --nodes 12 --cpus 2     # the lab at its biggest (memory allows it)
    python bench/scale.py [--sizes 1,3,6,12] [--png bench/scale.png]

Per job: sdiag is reset before it and read after it (RPCs by message type: per-node
step-complete and epilog messages are SLURM's own), and `submit --wait --json` reports the
SLURM commands slurm-rl itself ran. On 2 cores, 12 Ray nodes measure contention as much as
scale: the per-node cost is what extrapolates to real clusters. Not a CI gate.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

from _lab import SPEC, submit

HERE = Path(__file__).resolve().parent


def sdiag_rpcs() -> dict[str, int]:
    out = subprocess.run(["sdiag"], capture_output=True, text=True, timeout=30).stdout
    section = out.split("Remote Procedure Call statistics by message type")[-1].split(
        "Remote Procedure Call statistics by user"
    )[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s*(\w+)\s*\(\s*\d+\)\s*count:(\d+)", section, re.M)}


def large_job_spec(tmp: Path) -> Path:
    """The lab spec with the Ray settings slurm-rl gives jobs of 64+ nodes, forced on any size."""
    from slurm_rl.job.ray_start import ray_config_env

    data = json.loads(SPEC.read_text())
    data["env"] = {**data.get("env", {}), **ray_config_env(1000)}
    path = tmp / "lab-large-settings.json"
    path.write_text(json.dumps(data))
    return path


def one_job(nodes: int, spec: Path = SPEC, label: str = "") -> dict[str, object]:
    subprocess.run(["sdiag", "--reset"], check=True, capture_output=True, timeout=30)
    res = submit(
        HERE / "tasks_everywhere.py", nodes, "--wait", "--name", f"scale{nodes}{label}", timeout=600, spec=spec
    )
    data = json.loads(res.stdout.splitlines()[-1])
    rpcs = sdiag_rpcs()
    events = [json.loads(line) for line in Path(data["job_dir"], "events.jsonl").read_text().splitlines()]
    first = lambda name: min(e["t"] for e in events if e["event"] == name)  # noqa: E731
    last = lambda name: max(e["t"] for e in events if e["event"] == name)  # noqa: E731
    start = first("node_start")
    ups = [e for e in events if e["event"] == "node_up"]
    return {
        "nodes": nodes,
        "settings": label or "default",
        "exit": data["exit_code"],
        "slurm_calls": data.get("slurm_calls"),
        "rpcs_total": sum(rpcs.values()),
        "rpcs": rpcs,
        "all_up_s": round(last("node_up") - start, 2),
        "head_up_s": round(first("node_up") - start, 2),
        "driver_start_s": round(first("driver_start") - start, 2),
        "driver_connected_s": round(first("driver_connected") - start, 2),
        "job_s": round(last("job_end") - first("submitted"), 2),
        "ray_cpu_s_per_node": round(statistics.median(e.get("ray_cpu_s", 0) for e in ups), 2),
        "ray_rss_mb_per_node": round(statistics.median(e.get("ray_rss_mb", 0) for e in ups)),
        "ray_pss_mb_per_node": round(statistics.median(e.get("ray_pss_mb", 0) for e in ups)),
    }


def plot(rows: list[dict[str, object]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = [r["nodes"] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for key, label in (
        ("all_up_s", "all nodes up"),
        ("driver_connected_s", "driver connected"),
        ("head_up_s", "head up"),
    ):
        a.plot(n, [r[key] for r in rows], marker="o", label=label)
    a.set(xlabel="nodes", ylabel="seconds from srun", title="bring-up on the lab (2 cores)")
    a.legend()
    b.plot(n, [r["rpcs_total"] for r in rows], marker="o", label="slurmctld RPCs (sdiag)")
    b.plot(n, [r["slurm_calls"] for r in rows], marker="o", label="slurm-rl's own SLURM commands")
    b.set(xlabel="nodes", ylabel="per job", title="SLURM load per job")
    b.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=100)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,3,6,12")
    ap.add_argument("--png", default=str(HERE / "scale.png"))
    ap.add_argument(
        "--large-settings",
        action="store_true",
        help="also run the largest size with the GCS settings of 64+ node jobs (they must not slow it)",
    )
    args = ap.parse_args()
    rows = [one_job(int(n)) for n in args.sizes.split(",")]
    extra = []
    if args.large_settings:
        with tempfile.TemporaryDirectory() as tmp:
            extra = [one_job(rows[-1]["nodes"], large_job_spec(Path(tmp)), "-large")]  # type: ignore[arg-type]
    for r in rows + extra:
        print(json.dumps({k: v for k, v in r.items() if k != "rpcs"}))
    base = rows[0]
    for r in rows + extra:
        print(
            f"{r['nodes']:>3} nodes ({r['settings']}): all up {r['all_up_s']:5.1f} s, "
            f"driver connected {r['driver_connected_s']:5.1f} s "
            f"({r['driver_connected_s'] / base['driver_connected_s']:.2f}x of {base['nodes']}), "
            f"job {r['job_s']:5.1f} s, "
            f"RPCs {r['rpcs_total']} (slurm-rl's commands {r['slurm_calls']}), one Ray node "
            f"{r['ray_cpu_s_per_node']} CPU-s, {r['ray_rss_mb_per_node']} MB RSS, {r['ray_pss_mb_per_node']} MB PSS"
        )
    print("RPCs by type at the largest size:", json.dumps(rows[-1]["rpcs"]))
    plot(rows, Path(args.png))
    print(f"plot: {args.png}")


if __name__ == "__main__":
    main()
