"""A seeded chaos soak on the lab that is up (issue 59): a reproducible mix of jobs, a fault in
about one job in three, invariants checked after every job and at the end; each violation
printed with the seed, the job and the step that reproduces it. The last line:
``soak: N jobs, F faults (class: count, ...), V violations``.

    tests/lab/slurm-lab up --nodes 3 --pyxis
    python bench/soak.py --seed 7 --jobs 30 --concurrency 3 [--spec cluster_specs/lab.json]

Jobs: 1 to 3 nodes, bare or (with --pyxis-spec and a Pyxis lab) in containers; each driver
checks an answer computed on every node (tests/lab/experiments/soak_job.py). Faults (chosen by
the seed, at moments chosen by the seed): driver exception, driver SIGKILL, scancel during
bring-up and during the run, teardown during bring-up and during the run. Meanwhile a reader
calls `status` and `list` in a loop. Invariants: what `status --json` says agrees with SLURM
and with the fault (a cancelled job never says COMPLETED; an untouched job completes with its
own right answer); 0 processes and 0 containers of the job on every node; the job dir complete;
the job index lists every job once; no command hung or printed a traceback.
CI runs a short seed through tests/lab/test_soak_lab.py; long soaks are this script's."""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _lab import LAB, REPO, SPEC, containers, job_pids

JOB = REPO / "tests" / "lab" / "experiments" / "soak_job.py"
FAULTS = ("exception", "driver_kill", "scancel_bringup", "scancel_run", "teardown_bringup", "teardown_run")
CANCELS = {"scancel_bringup", "scancel_run", "teardown_bringup", "teardown_run"}
COMMAND_BOUND_S = 120  # no slurm-rl command may take longer (a hang is a violation)
JOB_BOUND_S = 300  # from submission to out of the queue


@dataclass
class Plan:
    index: int
    nodes: int
    container: bool
    fault: str  # "none" or one of FAULTS
    delay_s: float  # when a bring-up fault lands after submission

    def describe(self, seed: int) -> str:
        kind = "container" if self.container else "bare"
        return f"seed {seed} job #{self.index} ({self.nodes} node(s), {kind}, fault {self.fault})"


@dataclass
class Outcome:
    plan: Plan
    job_id: str = ""
    state: str = ""
    violations: list[str] = field(default_factory=list)


def plans(seed: int, jobs: int, containers_ok: bool) -> list[Plan]:
    rng = random.Random(seed)
    out = []
    for i in range(jobs):
        fault = rng.choice(FAULTS) if rng.random() < 1 / 3 else "none"
        out.append(Plan(i, rng.choice((1, 2, 3)), containers_ok and rng.random() < 0.3, fault, rng.uniform(0.0, 4.0)))
    return out


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-m", "slurm_rl", *argv], capture_output=True, text=True, timeout=COMMAND_BOUND_S
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"hung: over {COMMAND_BOUND_S} s")


def in_queue(job_id: str) -> bool:
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=30)
    return bool(out.stdout.strip())


def wait_until(cond, bound_s: float, poll_s: float = 0.3) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + bound_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(poll_s)
    return bool(cond())


def inject(plan: Plan, job_id: str, job_dir: Path, say) -> None:  # type: ignore[no-untyped-def]
    """The plan's fault, at its moment."""
    if plan.fault in ("scancel_bringup", "teardown_bringup"):
        time.sleep(plan.delay_s)
    elif plan.fault in ("scancel_run", "teardown_run", "driver_kill") and not wait_until(
        lambda: (job_dir / "soak_ready").exists(), 180
    ):
        say("the driver never said it was running")
        return
    if plan.fault.startswith("scancel"):
        subprocess.run(["scancel", job_id], capture_output=True, timeout=30)
    elif plan.fault.startswith("teardown"):
        res = cli("teardown", job_id)
        if res.returncode not in (0, 2) or "Traceback" in res.stderr:
            say(f"teardown exited {res.returncode}: {res.stderr.strip()[-300:]}")
    elif plan.fault == "driver_kill":
        head = json.loads((job_dir / "cluster.json").read_text())["head_node"]
        subprocess.run(
            [str(LAB), "exec", head, "--", "pkill", "-KILL", "-f", str(job_dir / "experiment.py")],
            capture_output=True,
            timeout=30,
        )


def expected(plan: Plan, status: dict, job_dir: Path) -> list[str]:
    """What the job must say for its fault."""
    state, code, reason = status.get("state"), status.get("exit_code"), status.get("exit_reason") or ""
    if plan.fault == "none":
        answer = json.loads((job_dir / "answer.json").read_text()) if (job_dir / "answer.json").exists() else {}
        if state != "COMPLETED" or code != 0 or not answer.get("ok") or answer.get("nodes") != plan.nodes:
            return [f"untouched job: {state}, exit {code} ({reason}), answer {answer}"]
    elif plan.fault == "exception":
        if state != "FAILED" or code != 1 or "driver exited 1" not in reason:
            return [f"driver exception: {state}, exit {code} ({reason})"]
    elif plan.fault == "driver_kill":
        if state != "FAILED" or "SIGKILL" not in reason:
            return [f"driver SIGKILL: {state}, exit {code} ({reason})"]
    elif state == "COMPLETED" or state not in ("CANCELLED", "FAILED"):
        return [f"{plan.fault}: {state}, exit {code} ({reason}): a cancelled job never says COMPLETED"]
    return []


def run_one(plan: Plan, seed: int, spec: Path, spec_pyxis: Path | None) -> Outcome:
    out = Outcome(plan)
    say = out.violations.append
    hold = "3" if plan.fault in ("none", "exception") else "40"
    argv = ["submit", str(spec_pyxis if plan.container and spec_pyxis else spec), str(JOB)]
    argv += ["--nodes", str(plan.nodes), "--cpus-per-node", "1", "--json", "--name", f"soak{seed}"]
    argv += ["--", hold, *(["--raise"] if plan.fault == "exception" else [])]
    res = cli(*argv)
    if res.returncode != 0:
        say(f"submit exited {res.returncode}: {res.stderr.strip()[-300:]}")
        return out
    data = json.loads(res.stdout.splitlines()[-1])
    out.job_id, job_dir = str(data["job_id"]), Path(data["job_dir"])
    if plan.fault != "none":
        inject(plan, out.job_id, job_dir, say)
    if not wait_until(lambda: not in_queue(out.job_id), JOB_BOUND_S, 1.0):
        say(f"still in the queue {JOB_BOUND_S} s after submission")
        subprocess.run(["scancel", out.job_id], capture_output=True, timeout=30)
        return out
    status = cli("status", out.job_id, "--json")
    if status.returncode != 0 or "Traceback" in status.stderr:
        say(f"status exited {status.returncode}: {status.stderr.strip()[-300:]}")
        return out
    said = json.loads(status.stdout.splitlines()[-1])
    out.state = str(said.get("state"))
    out.violations += expected(plan, said, job_dir)
    nodes = [f"node{k}" for k in range(1, 4)]
    if not wait_until(lambda: not any(job_pids(n, int(out.job_id)) for n in nodes), 20, 1.0):
        say("processes left: " + json.dumps({n: job_pids(n, int(out.job_id)) for n in nodes}))
    if plan.container and any(containers(n, int(out.job_id)) for n in nodes):
        say("containers left: " + json.dumps({n: containers(n, int(out.job_id)) for n in nodes}))
    for name in ("manifest.json", "events.jsonl"):
        if not (job_dir / name).exists():
            say(f"the job dir lacks {name}")
    started = (job_dir / "events.jsonl").exists() and '"node_start"' in (job_dir / "events.jsonl").read_text()
    if started and not (job_dir / "exit_code").exists():
        say("a job that started has no exit_code")
    return out


def reader(stop: threading.Event, problems: list[str]) -> None:
    """A user running `status` and `list` in a loop while the soak goes on."""
    while not stop.is_set():
        for argv in (("status",), ("list",)):
            res = cli(*argv)
            if res.returncode != 0 or "Traceback" in res.stderr + res.stdout:
                problems.append(f"`slurm-rl {' '.join(argv)}` exited {res.returncode}: {res.stderr.strip()[-300:]}")
        stop.wait(1.0)


def soak(
    seed: int, jobs: int, concurrency: int, spec: Path, spec_pyxis: Path | None
) -> tuple[list[Outcome], list[str]]:
    """Run the seed's plan; returns every job's outcome and the soak-wide violations."""
    index_before = _index_ids()
    problems: list[str] = []
    stop = threading.Event()
    watcher = threading.Thread(target=reader, args=(stop, problems), daemon=True)
    watcher.start()
    try:
        with ThreadPoolExecutor(concurrency) as pool:
            outcomes = list(pool.map(lambda p: run_one(p, seed, spec, spec_pyxis), plans(seed, jobs, bool(spec_pyxis))))
    finally:
        stop.set()
        watcher.join(timeout=COMMAND_BOUND_S)
    listed = Counter(i for i in _index_ids() if i not in index_before)
    for o in outcomes:
        if o.job_id and listed[o.job_id] != 1:
            o.violations.append(f"the job index lists it {listed[o.job_id]} times")
    return outcomes, problems


def _index_ids() -> list[str]:
    from slurm_rl.login.index import index_path

    try:
        return [str(json.loads(line).get("job_id")) for line in index_path().read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def summary(seed: int, outcomes: list[Outcome], problems: list[str]) -> str:
    faults = Counter(o.plan.fault for o in outcomes if o.plan.fault != "none")
    violations = sum(len(o.violations) for o in outcomes) + len(problems)
    per_class = ", ".join(f"{k}: {v}" for k, v in sorted(faults.items())) or "none"
    jobs, n_faults = len(outcomes), sum(faults.values())
    return f"soak: {jobs} jobs, {n_faults} faults ({per_class}), {violations} violations (seed {seed})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=3)
    ap.add_argument("--spec", type=Path, default=SPEC)
    ap.add_argument("--pyxis-spec", type=Path, default=None, help="container jobs with this spec (a Pyxis lab)")
    args = ap.parse_args()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    outcomes, problems = soak(args.seed, args.jobs, args.concurrency, args.spec, args.pyxis_spec)
    for o in outcomes:
        mark = "ok" if not o.violations else "VIOLATION"
        print(f"{mark}: {o.plan.describe(args.seed)}: job {o.job_id or '-'} {o.state}")
        for v in o.violations:
            print(f"    {v}")
    for p in problems:
        print(f"VIOLATION: seed {args.seed}: {p}")
    print(summary(args.seed, outcomes, problems))


if __name__ == "__main__":
    main()
