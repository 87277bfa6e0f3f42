"""A seeded chaos soak on the lab that is up (issue 59): a reproducible mix of jobs, a fault in
about one job in three, invariants checked after every job and at the end; each violation
printed with the seed, the job and the step that reproduces it. The last line:
``soak: N jobs, F faults planned, L landed (class: landed/planned, ...), V violations (seed S)``;
the exit code is 1 when V > 0.

    tests/lab/slurm-lab up --nodes 3 --pyxis --gpus 4
    python bench/soak.py --seed 7 --jobs 30 --concurrency 3 [--spec cluster_specs/lab.json]
        [--pyxis-spec cluster_specs/lab-pyxis.json] [--gpu-spec cluster_specs/lab-gpu.json]
        [--all-faults] [--oom (on `up --cgroup`)] [--parts] [--shapes] [--heal] [--cover]

Jobs: 1 to 3 nodes, bare or in containers (Pyxis with --pyxis-spec, Apptainer with
--apptainer-spec, on a lab that has them), about one in four with a GPU per node (--gpu-spec, on
the GPU lab); each driver checks an answer computed on every node
(tests/lab/experiments/soak_job.py); with --shapes also sweeps, chains and interactive clusters
attached to, grown and torn down (bench/soak_shapes.py); with --heal also 2-node jobs with
--heal 1 whose worker node fails or loses its raylet (they must complete right). Faults (chosen by the seed, at moments
chosen by the seed):
driver exception, driver SIGKILL, scancel during bring-up and during the run, teardown during
bring-up and during the run, a Ray daemon SIGKILLed while the job runs (a worker node's raylet,
the head's GCS); with --all-faults also the time limit, a node failed and revived, a preemption
and a held port; with --oom an OOM kill (bench/soak_faults.py). Meanwhile two readers call
`status`, `list` and `logs` of the newest job in a loop. With --cover, instead of a random mix:
one job per fault class that lands within 30 s and two untouched (soak_plans.covering_plans),
the lab-wide preemption last and alone, as CI runs it. Invariants: what `status --json` says
agrees with SLURM's accounting (`sacct`: bench/soak_accounting.py) and with the fault, which
must land (a fault whose command found nothing to hit is a violation): a cancelled job never
says COMPLETED, an untouched job completes with its own right answer; 0 processes, 0 temp dirs
and 0 containers of the job on every node, each probe's own command checked (one that could
not look is a violation); the job dir complete; the job index lists every job once; no command
hung or printed a traceback. CI runs a covering plan through tests/lab/test_soak_lab.py; long
soaks are this script's."""

from __future__ import annotations

import argparse
import json
import os
import pwd
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _lab import REPO, SPEC
from soak_accounting import disagreement, sacct_end
from soak_expected import expected
from soak_faults import (
    COMMAND_BOUND_S,
    FAULTS,
    LONG_FAULTS,
    RUN_AS,
    NodeFailures,
    cli,
    driver_args,
    hold_s,
    in_queue,
    inject,
    landed_by_end,
    submit_flags,
    wait_until,
)
from soak_plans import HEAL_FLAGS, LAB_WIDE, SHORT_FAULTS, Plan, covering_plans, plans, shape_flags
from soak_shapes import left_on_nodes, member_jobs_of, run_shape, settled, states, status_json

JOB = REPO / "tests" / "lab" / "experiments" / "soak_job.py"
JOB_BOUND_S = 420  # from submission to out of the queue (a time limit: SLURM's minute, then its grace)


@dataclass
class Outcome:
    plan: Plan
    job_id: str = ""
    state: str = ""
    violations: list[str] = field(default_factory=list)
    index_ids: list[str] = field(default_factory=list)  # what the job index must list once each
    landed: bool = False  # its fault did what it should to the job


def run_one(plan: Plan, seed: int, specs: dict[str, Path], failures: NodeFailures) -> Outcome:
    out = Outcome(plan)
    say = out.violations.append
    spec = specs["gpu" if plan.gpus else plan.runtime]
    if plan.shape != "plain":
        base = [str(spec), "--cpus-per-node", "1", "--name", f"soak{seed}"]
        began = time.time()

        def caught(job_dir: Path, said: dict) -> tuple[str, str] | None:  # ended by a neighbour's fault, named
            hit = failures.caught(job_dir, began, time.time())
            return hit if hit and not expected("none", plan.nodes, said, job_dir, hit) else None

        out.job_id, out.index_ids = run_shape(plan.shape, base, JOB, plan.nodes, plan.runtime, say, caught)
        out.state = " ".join(f"{i}:{states.get(i, '?')}" for i in out.index_ids)
        submitted.append(out.index_ids[-1] if out.index_ids else out.job_id)  # `logs` takes a sweep's task
        return out
    argv = ["submit", str(spec), str(JOB), *submit_flags(plan.fault), *(["--gpus-per-node", "1"] if plan.gpus else [])]
    argv += HEAL_FLAGS if plan.heal else []
    argv += [*shape_flags(plan, seed), "--cpus-per-node", "1", "--json", "--name", f"soak{seed}"]
    argv += ["--", hold_s(plan.fault), *driver_args(plan.fault)]
    since = time.time()
    res = cli(*argv)
    if res.returncode != 0:
        say(f"submit exited {res.returncode}: {res.stderr.strip()[-300:]}")
        return out
    data = json.loads(res.stdout.splitlines()[-1])
    out.job_id, job_dir = str(data["job_id"]), Path(data["job_dir"])
    submitted.append(out.job_id)
    missed: list[str] = []  # a fault that could not land: a violation unless another fault caught the job first
    landed = (
        inject(plan.fault, plan.delay_s, out.job_id, job_dir, failures, missed.append) if plan.fault != "none" else None
    )
    if not wait_until(lambda: not in_queue(out.job_id), JOB_BOUND_S, 1.0):
        say(f"still in the queue {JOB_BOUND_S} s after submission")
        subprocess.run(["scancel", out.job_id], capture_output=True, timeout=30)
        return out
    said = status_json(out.job_id, say)
    if not said:
        return out
    out.state = str(said.get("state"))
    out.landed = bool(landed) if landed is not None else landed_by_end(plan.fault, said)
    why = disagreement(said, sacct_end(out.job_id))
    if why:
        say(f"`status` disagrees with SLURM's accounting: {why}")
    caught = failures.caught(job_dir, since, time.time())
    out.violations += expected(plan.fault, plan.nodes, said, job_dir, caught, plan.heal) + ([] if caught else missed)
    crashed = caught[0] if caught and caught[1] == "failure" else ""
    out.violations += left_on_nodes(out.job_id, plan.runtime, crashed)
    members = member_jobs_of(str(job_dir))  # a healing job's replacements end with it
    if members and not wait_until(lambda: not any(in_queue(m) for m in members), 60, 1.0):
        say(f"member jobs left in the queue after the job ended: {[m for m in members if in_queue(m)]}")
    for name in ("manifest.json", "events.jsonl"):
        if not (job_dir / name).exists():
            say(f"the job dir lacks {name}")
    started = (job_dir / "events.jsonl").exists() and '"node_start"' in (job_dir / "events.jsonl").read_text()
    if started and not (job_dir / "exit_code").exists():
        say("a job that started has no exit_code")
    return out


submitted: list[str] = []  # the soak's jobs, newest last (the readers' `logs` follows the newest)


def reader(stop: threading.Event, problems: list[str], commands: str) -> None:
    """A user running `status` and `list` (or `logs` of the newest job) in a loop meanwhile."""
    while not stop.is_set():
        newest = submitted[-1:]
        todo = [("status",), ("list",)] if commands == "status" else [("logs", *newest)] if newest else []
        for argv in todo:
            res = cli(*argv)
            not_yet = argv[0] == "logs" and res.returncode == 2 and "does not exist yet" in res.stderr  # one line
            ours = res.stderr if argv[0] == "logs" else res.stderr + res.stdout  # a driver's log may hold one
            if (res.returncode != 0 and not not_yet) or "Traceback" in ours:
                problems.append(f"`slurm-rl {' '.join(argv)}` exited {res.returncode}: {res.stderr.strip()[-300:]}")
        stop.wait(1.0)


def soak(
    seed: int,
    jobs: int,
    concurrency: int,
    spec: Path,
    spec_pyxis: Path | None,
    spec_apptainer: Path | None = None,
    faults: tuple[str, ...] = FAULTS,
    spec_gpu: Path | None = None,
    parts: bool = False,
    shapes: bool = False,
    heal: bool = False,
    cover: bool = False,
    user: str | None = None,
) -> tuple[list[Outcome], list[str]]:
    """Run the seed's plan (with COVER, one built to cover FAULTS: ``covering_plans``), its
    slurm-rl commands as USER (an ordinary user of the lab; None: this process's); returns every
    job's outcome and the soak-wide violations."""
    RUN_AS["user"] = user
    failures = NodeFailures()
    specs = {"none": spec, **({"pyxis": spec_pyxis} if spec_pyxis else {})}
    specs.update({"apptainer": spec_apptainer} if spec_apptainer else {})
    runtimes = tuple(r for r in specs if r != "none")
    specs.update({"gpu": spec_gpu} if spec_gpu else {})
    index_before = _index_ids(user)
    problems: list[str] = []
    stop = threading.Event()
    watchers = [threading.Thread(target=reader, args=(stop, problems, c), daemon=True) for c in ("status", "logs")]
    for w in watchers:
        w.start()
    try:
        if cover:
            todo = covering_plans(seed, faults, runtimes)
        else:
            todo = plans(seed, jobs, runtimes, faults, gpus=spec_gpu is not None, parts=parts, shapes=shapes, heal=heal)
        alone = [p for p in todo if cover and p.fault in LAB_WIDE]  # after the rest, one at a time
        with ThreadPoolExecutor(concurrency) as pool:
            outcomes = list(pool.map(lambda p: run_one(p, seed, specs, failures), [p for p in todo if p not in alone]))
        outcomes += [run_one(p, seed, specs, failures) for p in alone]
    finally:
        stop.set()
        for w in watchers:
            w.join(timeout=COMMAND_BOUND_S)
    if failures.failed:  # a node failed under jobs: it kept their temp dirs until a job ran there again
        problems += settled(str(spec), JOB, [i for o in outcomes for i in o.index_ids or [o.job_id] if i])
    listed = Counter(i for i in _index_ids(user) if i not in index_before)
    for o in outcomes:
        for i in o.index_ids or [o.job_id] * bool(o.job_id):
            if listed[i] != 1:
                o.violations.append(f"the job index lists {i} {listed[i]} times")
    return outcomes, problems


def _index_ids(user: str | None) -> list[str]:
    """The ids in USER's job index (its home's; None: this process's)."""
    from slurm_rl.login.reading.index import index_path

    path = index_path(None if user is None else Path(pwd.getpwnam(user).pw_dir))  # the soak's env is the user's
    try:
        return [str(json.loads(line).get("job_id")) for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def summary(seed: int, outcomes: list[Outcome], problems: list[str]) -> str:
    """The soak's last line: jobs, faults planned and landed (per class), violations, the seed."""
    planned = Counter(o.plan.fault for o in outcomes if o.plan.fault != "none")
    landed = Counter(o.plan.fault for o in outcomes if o.plan.fault != "none" and o.landed)
    per_class = ", ".join(f"{k}: {landed[k]}/{v}" for k, v in sorted(planned.items())) or "none"
    n_planned, n_landed = sum(planned.values()), sum(landed.values())
    return (
        f"soak: {len(outcomes)} jobs, {n_planned} faults planned, {n_landed} landed ({per_class}),"
        f" {violations(outcomes, problems)} violations (seed {seed})"
    )


def violations(outcomes: list[Outcome], problems: list[str]) -> int:
    return sum(len(o.violations) for o in outcomes) + len(problems)


def main() -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=3)
    ap.add_argument("--spec", type=Path, default=SPEC)
    ap.add_argument("--pyxis-spec", type=Path, default=None, help="container jobs with this spec (a Pyxis lab)")
    ap.add_argument("--apptainer-spec", type=Path, default=None, help="and with this one (`up --apptainer`)")
    ap.add_argument("--gpu-spec", type=Path, default=None, help="GPU jobs with this spec (`up --gpus N`)")
    ap.add_argument(
        "--all-faults", action="store_true", help="also time limits, node failures, preemptions, held ports (slow)"
    )
    ap.add_argument("--oom", action="store_true", help="also OOM kills (the cgroup lab: `up --cgroup`)")
    ap.add_argument("--parts", action="store_true", help="also jobs of parts (a GPU lab: labgpu and labcpu)")
    ap.add_argument("--shapes", action="store_true", help="also sweeps, chains and interactive clusters")
    ap.add_argument("--heal", action="store_true", help="also 2-node jobs with --heal 1, healed")
    ap.add_argument("--cover", action="store_true", help="one job per short fault class (CI's plan; --jobs ignored)")
    ap.add_argument(
        "--user", default=None, help="run every slurm-rl command as this lab user (root injects the faults)"
    )
    args = ap.parse_args()
    faults = (*FAULTS, *LONG_FAULTS) if args.all_faults else SHORT_FAULTS if args.cover else FAULTS
    faults = (*faults, "oom") if args.oom else faults
    outcomes, problems = soak(
        args.seed, args.jobs, args.concurrency, args.spec, args.pyxis_spec, args.apptainer_spec, faults, args.gpu_spec,
        args.parts, args.shapes, args.heal, args.cover, args.user,
    )  # fmt: skip
    for o in outcomes:
        mark = "ok" if not o.violations else "VIOLATION"
        print(f"{mark}: {o.plan.describe(args.seed)}: job {o.job_id or '-'} {o.state}")
        for v in o.violations:
            print(f"    {v}")
    print("\n".join([*(f"VIOLATION: seed {args.seed}: {p}" for p in problems), summary(args.seed, outcomes, problems)]))
    sys.exit(1 if violations(outcomes, problems) else 0)


if __name__ == "__main__":
    main()
