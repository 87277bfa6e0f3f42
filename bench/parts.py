"""A job of parts against a plain job (issue 57's benchmark, not a CI gate): the seconds from
`submit` to the driver's start for a 4-part job (trainer, rollout, a judge pool of two, a
sandbox per rollout node) and for a 1-part job on as many nodes, in the same run; and the
seconds from a judge instance's death to its replacement being ready. On the GPU lab:

    tests/lab/slurm-lab up --nodes 3 --gpus 4
    python bench/parts.py [--repeat 3]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _lab import LAB, REPO, wait_file

PARTS_DIR = REPO / "tests" / "lab" / "experiments" / "parts"
SPEC = REPO / "cluster_specs" / "lab-gpu.json"
ONE_PART = "trainer: {nodes: 3, gpus_per_node: 1}\n"


def submit(parts: Path, *args: str) -> dict:
    argv = [sys.executable, "-m", "slurm_rl", "submit", str(SPEC), str(PARTS_DIR / "hello_parts.py"), "--parts",
            str(parts), "--json", "--", *args]  # fmt: skip
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=PARTS_DIR, check=True)
    return json.loads(res.stdout.splitlines()[-1])


def events(job: dict) -> list[dict]:
    return [json.loads(line) for line in (Path(job["job_dir"]) / "events.jsonl").read_text().splitlines()]


def to_driver_s(job: dict) -> float:
    wait_file(Path(job["job_dir"]) / "exit_code", 300)
    seen = events(job)
    submitted = next(e["t"] for e in seen if e["event"] == "submitted")
    return next(e["t"] for e in seen if e["event"] == "driver_start") - submitted


def replacement_s(job: dict) -> float:
    """Kill judge instance 0 on its node while the driver holds; seconds to its restart's ready."""
    jd = Path(job["job_dir"])
    wait_file(jd / "services" / "judge" / "node1-0.json", 120)
    state = json.loads((jd / "services" / "judge" / "node1-0.json").read_text())
    end = time.monotonic() + 60
    while not state.get("ready") and time.monotonic() < end:
        time.sleep(0.2)
        state = json.loads((jd / "services" / "judge" / "node1-0.json").read_text())
    subprocess.run([str(LAB), "exec", "node1", "--", "kill", "-9", str(state["pid"])], check=True, timeout=30)
    (jd / "release").touch()
    wait_file(jd / "exit_code", 300)
    seen = events(job)
    died = next(e["t"] for e in seen if e["event"] == "service_exit" and e["instance"] == 0)
    return next(e["t"] for e in seen if e["event"] == "service_ready" and e["instance"] == 0 and e["t"] > died) - died


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        one = Path(tmp) / "one.yaml"
        one.write_text(ONE_PART)
        four = PARTS_DIR / "parts.yaml"
        plain, parts, replace = [], [], []
        for _ in range(args.repeat):
            plain.append(to_driver_s(submit(one)))
            parts.append(to_driver_s(submit(four)))
            replace.append(replacement_s(submit(four, "--hold")))
    p, q = statistics.median(plain), statistics.median(parts)
    print(f"submit -> driver start: 1 part {p:.2f} s, 4 parts {q:.2f} s: {q / p:.2f}x (median of {args.repeat})")
    print(f"a judge instance's death -> its replacement ready: {statistics.median(replace):.2f} s (median)")


if __name__ == "__main__":
    main()
