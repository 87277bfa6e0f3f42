"""What containers cost on the lab (`tests/lab/slurm-lab up --nodes 3 --pyxis --apptainer`), same run:

1. a no-op 3-node job (bench/noop.py) with the bare lab spec, in Pyxis and in Apptainer (where
   the lab has it), and the raw `ray start` recipe (bench/bringup.py's baseline) as the reference;
2. teardown of a running 3-node container job: from `slurm-rl teardown JOBID` to zero processes
   and zero containers (Pyxis: `enroot list`; Apptainer: loop devices backing the image) on
   every node.

    python bench/containers.py [--repeat 2]
    python bench/containers.py --user srl-user [--repeat 2]   # 3. root against an ordinary user

Containers start from each node's prepared copy of the image (the image cache): the repeat runs
show that; the first container job of a fresh lab (or of a new image) prepares it, and its
preparation cost per GB (events image_prepared) is printed where one happened.

Not a test and not a CI gate: it prints numbers and ratios (goals: containers add <= 15% to the
no-op job; teardown to zero <= 5 s).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _lab import HOLD, LAB, REPO, SPEC, SPEC_PYXIS, containers, job_pids, submit, submit_json, wait_file
from bringup import run_baseline

NODES = ["node1", "node2", "node3"]
SPEC_APPTAINER = REPO / "cluster_specs" / "lab-apptainer.json"
STATE = Path("/var/lib/slurm-lab")


def has_apptainer() -> bool:
    return "--apptainer" in (STATE / "run" / "up-args").read_text().split()


def image_loops(node: str, job_id: int) -> list[str]:
    """Loop devices backing the lab image (Apptainer mounts it through one per container)."""
    image = json.loads(SPEC_APPTAINER.read_text())["cpu_image"]
    out = subprocess.run([str(LAB), "exec", node, "--", "losetup", "-j", image], capture_output=True, text=True)
    return out.stdout.splitlines()


def noop_job(spec: Path, user: str | None = None) -> dict[str, float]:
    """A no-op 3-node job as the user sees it (`submit --wait`; as ``user`` where given), and its
    parts from events.jsonl."""
    t0 = time.time()
    res = submit(
        REPO / "bench" / "noop.py", 3, "--wait", "--name", "bench-containers", timeout=600, spec=spec, user=user
    )
    wall = time.time() - t0
    if res.returncode != 0:
        raise SystemExit(f"the no-op job failed ({spec.name}): {res.stdout[-500:]} {res.stderr[-500:]}")
    job_dir = Path(json.loads(res.stdout.splitlines()[-1])["job_dir"])
    events = [json.loads(line) for line in (job_dir / "events.jsonl").read_text().splitlines()]
    launch = min(e["t"] for e in events if e["event"] == "node_start")
    first = {}
    for e in events:
        first.setdefault(e["event"], e["t"])
    return {
        "wall": wall,
        "job": first["job_end"] - first["submitted"],
        "to_bootstrap": launch - first["submitted"],  # sbatch, scheduling, and the image unpack
        "all_up": max(e["t"] for e in events if e["event"] == "node_up") - launch,
        "prepare_s_per_gb": max(
            (e["seconds"] / (e["bytes"] / 1e9) for e in events if e["event"] == "image_prepared"), default=0.0
        ),
    }


def teardown_to_zero(spec: Path = SPEC_PYXIS, left=containers) -> dict[str, float]:  # type: ignore[no-untyped-def]
    data = submit_json(HOLD, 3, "--name", "bench-containers-td", spec=spec)
    wait_file(Path(data["job_dir"]) / "driver_ready", timeout_s=600)
    job_id = data["job_id"]
    t0 = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "slurm_rl", "teardown", str(job_id), "--spec", str(spec)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    returned = time.monotonic() - t0
    no_process = None
    while time.monotonic() - t0 < 120:
        if no_process is None and not any(job_pids(n, job_id) for n in NODES):
            no_process = time.monotonic() - t0
        if no_process is not None and not any(left(n, job_id) for n in NODES):
            break
        time.sleep(0.1)
    return {"returned": returned, "no_process": no_process or float("nan"), "no_container": time.monotonic() - t0}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--no-baseline", action="store_true", help="skip the raw `ray start` recipe")
    ap.add_argument("--user", help="also run each no-op job as this ordinary user (e.g. srl-user), interleaved")
    args = ap.parse_args()
    if args.user:
        return by_user(args.user, args.repeat)
    runs: dict[str, list[dict[str, float]]] = {"raw ray start": [], "slurm-rl": [], "slurm-rl + pyxis": []}
    if args.no_baseline:
        del runs["raw ray start"]
    if has_apptainer():
        runs["slurm-rl + apptainer"] = []
    for _ in range(args.repeat):  # interleaved, so that a busy moment of the machine hits all three
        if "raw ray start" in runs:
            runs["raw ray start"].append(run_baseline(3))
        runs["slurm-rl"].append(noop_job(SPEC))
        runs["slurm-rl + pyxis"].append(noop_job(SPEC_PYXIS))
        if "slurm-rl + apptainer" in runs:
            runs["slurm-rl + apptainer"].append(noop_job(SPEC_APPTAINER))
    med = {name: {k: statistics.median(s[k] for s in rows) for k in rows[0]} for name, rows in runs.items()}
    print(f"{'no-op job, 3 nodes':20s} {'job wall':>9s} {'to bootstrap':>13s} {'all nodes up':>13s}")
    for name, r in med.items():
        extra = (
            f"{r['to_bootstrap']:12.2f}s {r['all_up']:12.2f}s"
            if "to_bootstrap" in r
            else f"{'':13s} {r['all_up']:12.2f}s"
        )
        print(f"{name:20s} {r['wall']:8.2f}s {extra}")
    bare, boxed = med["slurm-rl"]["wall"], med["slurm-rl + pyxis"]["wall"]
    print(f"pyxis / bare slurm-rl, no-op job wall: {boxed / bare:.2f}x (goal <= 1.15x)")
    if "slurm-rl + apptainer" in med:
        print(f"apptainer / bare slurm-rl, no-op job wall: {med['slurm-rl + apptainer']['wall'] / bare:.2f}x")
    cold = [r["prepare_s_per_gb"] for r in runs["slurm-rl + pyxis"] if r["prepare_s_per_gb"]]
    if cold:
        print(f"a cold node's image preparation (unpack once): {max(cold):.1f} s per GB of image")
    if "raw ray start" in med:
        raw = med["raw ray start"]["wall"]
        print(f"slurm-rl / raw ray start: bare {bare / raw:.2f}x, in containers {boxed / raw:.2f}x")
    kinds = {"pyxis": (SPEC_PYXIS, containers)}
    if has_apptainer():
        kinds["apptainer"] = (SPEC_APPTAINER, image_loops)
    for kind, (spec, left) in kinds.items():
        td = [teardown_to_zero(spec, left) for _ in range(args.repeat)]
        for k in ("returned", "no_process", "no_container"):
            took = statistics.median(t[k] for t in td)
            print(f"{kind} job teardown, {k.replace('_', ' ')}: median {took:.2f} s")
    print("(goal: zero processes and zero containers <= 5 s after teardown starts)")


def by_user(user: str, repeat: int) -> None:
    """The no-op 3-node job per runtime as root and as ``user``, interleaved, same run: what an
    unprivileged start costs (enroot and Apptainer in a user namespace; Apptainer's image
    extracted where /dev/fuse is root's)."""
    specs = {"bare": SPEC, "pyxis": SPEC_PYXIS, **({"apptainer": SPEC_APPTAINER} if has_apptainer() else {})}
    rows: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(repeat):
        for kind, spec in specs.items():
            for who in ("root", user):
                rows.setdefault((kind, who), []).append(noop_job(spec, None if who == "root" else user))
    print(f"{'no-op job, 3 nodes':28s} {'job wall':>9s} {'to bootstrap':>13s} {'all nodes up':>13s}")
    med = {key: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for key, runs in rows.items()}
    for (kind, who), r in med.items():
        print(f"{kind + ' as ' + who:28s} {r['wall']:8.2f}s {r['to_bootstrap']:12.2f}s {r['all_up']:12.2f}s")
    for kind in specs:
        print(f"{kind}: {user} / root, no-op job wall: {med[(kind, user)]['wall'] / med[(kind, 'root')]['wall']:.2f}x")


if __name__ == "__main__":
    main()
