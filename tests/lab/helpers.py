"""Helpers for lab tests: submit through the real CLI, look at nodes through slurm-lab exec."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.conftest import LAB, REPO, run_cli

SPEC = str(REPO / "cluster_specs" / "lab.json")
SPEC_PYXIS = str(REPO / "cluster_specs" / "lab-pyxis.json")  # the same lab, every step in a container
SPEC_APPTAINER = str(REPO / "cluster_specs" / "lab-apptainer.json")  # the same, under Apptainer
STATE = Path(os.environ.get("SLURM_LAB_STATE", "/var/lib/slurm-lab"))
EXPERIMENTS = REPO / "tests" / "lab" / "experiments"
# Processes every lab node always has (PID 1 and the slurmd), plus transient SLURM helpers.
BASELINE = ("tini", "slurmd", "slurmstepd", "ps", "sleep")


def submit(
    experiment: str,
    *args: str,
    nodes: int = 3,
    extra: tuple[str, ...] = (),
    timeout: float = 180,
    spec: str | Path = SPEC,
) -> tuple[subprocess.CompletedProcess[str], dict]:
    """`slurm-rl submit --wait --json`; returns the process and its parsed JSON line."""
    res = run_cli(
        "submit",
        str(spec),
        str(EXPERIMENTS / experiment),
        "--nodes",
        str(nodes),
        "--wait",
        "--json",
        *extra,
        "--",
        *args,
        timeout=timeout,
    )
    lines = [line for line in res.stdout.splitlines() if line.startswith("{")]
    return res, (json.loads(lines[-1]) if lines else {})


def last_json(text: str, first_key: str) -> dict:
    """The last JSON object in a driver log that starts with ``{"first_key"``. The driver's
    stdout and Ray's own log lines (a killed worker's warning) share the file, and either may be
    written between another's text and its newline, so the object is decoded where it starts and
    ends where its braces close, whatever is glued before or after it."""
    start = text.rindex('{"' + first_key + '"')
    obj, _ = json.JSONDecoder().raw_decode(text, start)
    return obj


def tagged_json(text: str, tag: str) -> Any:
    """The JSON value an experiment printed after ``TAG `` in a driver log (the first such line),
    decoded as :func:`last_json` does: Ray's lines may be glued before or after it."""
    start = text.index(tag + " ") + len(tag) + 1
    obj, _ = json.JSONDecoder().raw_decode(text, start)
    return obj


def lab_exec(node: str) -> list[str]:
    """`slurm-lab exec NODE`, of whichever lab has NODE (a lab beside the first: bnode1, ...)."""
    named = re.fullmatch(r"([b-e])node\d+", node)
    return [str(LAB), *(("--name", named.group(1)) if named else ()), "exec", node]


def node_processes(node: str) -> list[str]:
    """Command lines of every process on a lab node except the baseline ones."""
    out = subprocess.run(
        [*lab_exec(node), "--", "ps", "-eo", "pid=,comm=,args="],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    procs = []
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and parts[1] not in BASELINE:
            procs.append(line.strip())
    return procs


def job_leftovers(nodes: list[str], job_id: int) -> dict[str, list[str]]:
    """Per node: processes of the job (its temp dir or marker) and its node-local temp dir."""
    found: dict[str, list[str]] = {}
    for node in nodes:
        out = subprocess.run(
            [
                *lab_exec(node),
                "--",
                "sh",
                "-c",
                f"for p in /proc/[0-9]*; do "
                f"if tr '\\0' '\\n' < $p/environ 2>/dev/null | grep -qx SLURM_RL_JOB_ID={job_id} || "
                f"tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q srl-{job_id}; then "
                f"echo \"${{p#/proc/}} $(tr '\\0' ' ' < $p/cmdline | cut -c1-80)\"; fi; done; "
                f"[ -e /tmp/srl-{job_id} ] && echo tempdir /tmp/srl-{job_id} || true",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        items = [line for line in out.splitlines() if line.strip() and "sh -c" not in line and "grep" not in line]
        if items:
            found[node] = items
    return found


def wait_for(condition, timeout_s: float, poll_s: float = 0.2):  # type: ignore[no-untyped-def]
    """Poll ``condition`` until it returns something truthy; return it, or the last value."""
    end = time.monotonic() + timeout_s
    value = condition()
    while not value and time.monotonic() < end:
        time.sleep(poll_s)
        value = condition()
    return value


def job_dir(data: dict) -> Path:
    return Path(data["job_dir"])


def job_cluster(data: dict) -> dict:
    """The job's cluster.json: its nodes (whichever SLURM gave it), head, address, ports."""
    return json.loads((job_dir(data) / "cluster.json").read_text())


def fabric_ip(node: str) -> str:
    """The lab's second network (fab0): nodeK has 10.78.0.1K (tests/lab/slurm-lab)."""
    return f"10.78.0.{10 + int(node.removeprefix('node'))}"


def start(
    experiment: str,
    *args: str,
    nodes: int = 3,
    extra: tuple[str, ...] = (),
    spec: str = SPEC,
    cwd: Path | None = None,
) -> dict:
    """Submit without waiting; returns the --json object (job_id, job_dir, ...)."""
    res = run_cli(
        "submit",
        spec,
        str(EXPERIMENTS / experiment),
        *("--nodes", str(nodes), "--json", *extra, "--", *args),
        timeout=60,
        cwd=cwd,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


def in_queue(job_id: int) -> bool:
    out = subprocess.run(
        ["squeue", "-h", "-j", str(job_id), "-o", "%T"], capture_output=True, text=True, timeout=10
    ).stdout.strip()
    return out not in ("", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT")


def wait_ready(data: dict, timeout_s: float = 120) -> list[tuple[str, int]]:
    """Wait for hold.py's driver_ready file; returns [(host, actor pid)]."""
    ready = job_dir(data) / "driver_ready"
    assert wait_for(lambda: ready.exists() and ready.read_text().endswith("\n"), timeout_s), (
        f"job {data['job_id']} never got ready; see {job_dir(data) / 'logs'}"
    )
    return [(h, int(p)) for h, p in (line.split() for line in ready.read_text().splitlines())]


def node_failures(events: Path, tail: int = 12) -> str:
    """What the job's failed nodes said (node_failed events) and their logs' last lines, for
    assertion messages: a failure in CI must be readable from the CI log alone."""
    from slurm_rl.core.events import read_events

    said = []
    for e in read_events(events):
        if e.get("event") == "node_failed":
            log = events.parent / "logs" / f"node-{e.get('host')}.log"
            lines = log.read_text(errors="replace").splitlines()[-tail:] if log.exists() else []
            said.append(f"{e.get('host')}: {e.get('error')}\n" + "\n".join(lines))
    return "\n".join(said) or "no node failed"


def last_words(data: dict, nodes: list[str], tail: int = 6) -> str:
    """A job's exit reason and its nodes' last own lines (not Ray's INFO), for the message of a
    leftover assertion: what the bootstrap did last is the clue, and CI keeps only its log."""
    d = job_dir(data)
    reason = (d / "exit_reason").read_text().strip() if (d / "exit_reason").exists() else "(no exit_reason)"
    said = [f"job {data['job_id']}: {reason}"]
    for node in nodes:
        log = d / "logs" / f"node-{node}.log"
        if log.exists():
            own = [ln for ln in log.read_text(errors="replace").splitlines() if ln.startswith("[")]
            said += [f"{node}: {ln}" for ln in own[-tail:]]
    return "\n".join(said)


def wait_gone(job_id: int, timeout_s: float = 120) -> None:
    assert wait_for(lambda: not in_queue(job_id), timeout_s), f"job {job_id} still in the queue"


def assert_no_leftovers(nodes: list[str], job_id: int, within_s: float = 10) -> None:
    assert wait_for(lambda: not job_leftovers(nodes, job_id), within_s), job_leftovers(nodes, job_id)


def exit_reason(data: dict) -> str:
    path = job_dir(data) / "exit_reason"
    wait_for(path.exists, 10)
    return path.read_text().strip()


def apptainer_missing() -> str:
    """Why the running lab has no Apptainer ('' when it has): `up --apptainer` records it."""
    if "--apptainer" in (STATE / "run" / "up-args").read_text(errors="replace").split():
        return ""
    missing = STATE / "run" / "apptainer-missing"
    why = missing.read_text().strip() if missing.exists() else "the lab runs without Apptainer"
    return f"{why}; bring it up with `tests/lab/slurm-lab up --nodes 3 --apptainer`"


def pyxis_missing() -> str:
    """Why the running lab has no Pyxis ('' when it has): `up --pyxis` records its mode."""
    mode_file = STATE / "run" / "mode"
    if mode_file.exists() and mode_file.read_text().strip().startswith("pyxis"):
        return ""
    missing = STATE / "run" / "pyxis-missing"
    why = missing.read_text().strip() if missing.exists() else "the lab runs without Pyxis"
    return f"{why}; bring it up with `tests/lab/slurm-lab up --nodes 3 --pyxis`"


def job_containers(nodes: list[str], job_id: int) -> dict[str, list[str]]:
    """The job's unpacked container root filesystems per node (`enroot list`: pyxis names them
    pyxis_<job>.<step>, or pyxis_<job>_<job>.<step> with container_scope=job); none without Pyxis."""
    out: dict[str, list[str]] = {}
    if pyxis_missing():
        return out
    for node in nodes:
        listed = subprocess.run(
            [str(LAB), "exec", node, "--", "enroot", "list"], capture_output=True, text=True, timeout=30, check=True
        ).stdout.split()
        listed = [c for c in listed if c.startswith((f"pyxis_{job_id}.", f"pyxis_{job_id}_"))]
        if listed:
            out[node] = listed
    return out


def lab_spec(tmp_path: Path, **fields: object) -> Path:
    """The lab's spec with some fields changed, written under ``tmp_path``."""
    data = {**json.loads(Path(SPEC).read_text()), **fields}
    path = tmp_path / "lab-variant.json"
    path.write_text(json.dumps(data))
    return path


def lab_up(*args: str) -> None:
    """`slurm-lab up ARGS` (a test that needs another lab brings it back with ``lab_up_args()``)."""
    res = subprocess.run([str(LAB), "up", *args], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr


def lab_up_args() -> list[str]:
    """The `slurm-lab up` options the running lab was brought up with."""
    saved = STATE / "run" / "up-args"
    return saved.read_text().split() if saved.exists() else ["--nodes", "3"]


# A driver run off the job's nodes through Ray Client (argv[1]: "init_ray", or "plain" for NeMo
# Gym's documented ray.init(address, runtime_env=...)): prints JSON with what it reached.
CLIENT_DRIVER = """
import json, os, socket, sys
import ray
from slurm_rl.distributed import init_ray
if sys.argv[1] == "init_ray":
    kind = init_ray()
else:  # NeMo Gym's form: the address given explicitly, a job-level runtime_env
    kind = ray.init(os.environ["RAY_ADDRESS"], runtime_env={"env_vars": {"CLIENT_SETTING": "from-here"}}) and "ray.init"
@ray.remote(num_cpus=0.01)
def where():
    return socket.gethostname(), os.environ.get("CLIENT_SETTING")
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On
alive = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
hosts = ray.get([where.options(scheduling_strategy=On(node, soft=False)).remote() for node in alive])
print(json.dumps({"client": kind, "nodes": len(alive), "here": socket.gethostname(),
                  "hosts": sorted({h for h, _ in hosts}), "settings": sorted({str(v) for _, v in hosts})}))
"""
