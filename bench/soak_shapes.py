"""The soak's job shapes beside its plain jobs (``bench/soak.py --shapes``): a sweep (a job array
of two points, both at once), a chain of two jobs (the first finishes the run, so the second has
nothing to do), and an interactive cluster that a user attaches to, grows by a member when the
lab has a node the job lacks, and tears down. Each is checked as its user would: every job of it
ends as it should, each driver with its right answer, ``status`` and ``sweep-summary`` say so,
and nothing of it is left on any node or in the queue. A shape carries no fault of its own: the
faults aimed at its neighbours (and a node failure, which catches every job on the node) are
its load."""

from __future__ import annotations

import json
from pathlib import Path

from _lab import ProbeError, containers, job_pids, temp_dirs
from soak_faults import DOWN_NOW, cli, in_queue, wait_until

SHAPES = ("sweep", "chain", "interactive")
NODES = [f"node{k}" for k in range(1, 4)]
BOUND_S = 420  # from submission to out of the queue
ATTACH = "from slurm_rl.distributed import init_ray; import ray; init_ray(); print('NODES', len(ray.nodes()))"


def left_on_nodes(job_id: str, runtime: str, crashed: str = "") -> list[str]:
    """What of the job is still on a node: processes, its temp dir (Ray's sessions), containers.
    A node that failed under the job (``crashed``) keeps its temp dir until the next job there
    removes it (job/stale_dirs.py): the soak's last check (``settled``) sees to that. A node down
    right now (another job's node failure) has no processes to look at; any other probe that
    could not look is a violation, never "nothing left"."""
    up = [n for n in NODES if n not in DOWN_NOW]
    try:
        out = []
        if not wait_until(lambda: not any(job_pids(n, job_id) for n in up), 20, 1.0):
            out.append(f"{job_id}: processes left: " + json.dumps({n: job_pids(n, job_id) for n in up}))
        others = [n for n in up if n != crashed]
        if not wait_until(lambda: not any(temp_dirs(n, job_id) for n in others), 10, 1.0):
            out.append(f"{job_id}: temp dirs left: " + json.dumps({n: temp_dirs(n, job_id) for n in others}))
        if runtime == "pyxis" and any(containers(n, job_id) for n in up):
            out.append(f"{job_id}: containers left: " + json.dumps({n: containers(n, job_id) for n in up}))
        return out
    except ProbeError as e:
        return [f"{job_id}: {e}"]


states: dict[str, str] = {}  # job id -> the state `status` said last (for the soak's report)


def settled(spec: str, job: Path, ids: list[str]) -> list[str]:
    """After the soak: one job on every node (its bootstraps remove what failed nodes kept of
    ended jobs), then no temp dir of any of the soak's jobs may be left anywhere."""
    res = cli("submit", spec, str(job), "--nodes", str(len(NODES)), "--cpus-per-node", "1", "--json", "--", "1")
    if res.returncode != 0:
        return [f"the settling job: submit exited {res.returncode}: {res.stderr.strip()[-300:]}"]
    last = str(json.loads(res.stdout.splitlines()[-1])["job_id"])
    if not wait_until(lambda: not in_queue(last), BOUND_S, 1.0):
        return [f"the settling job {last} still in the queue after {BOUND_S} s"]
    try:
        left = {n: [d for i in ids for d in temp_dirs(n, i)] for n in NODES}
    except ProbeError as e:
        return [f"after the settling job: {e}"]
    return (
        [f"temp dirs of ended jobs left after a job ran on every node: {json.dumps(left)}"]
        if any(left.values())
        else []
    )


def status_json(job_id: str, say) -> dict:  # type: ignore[no-untyped-def]
    res = cli("status", job_id, "--json")
    if res.returncode != 0 or "Traceback" in res.stderr:
        say(f"`status {job_id}` exited {res.returncode}: {res.stderr.strip()[-300:]}")
        return {}
    said = json.loads(res.stdout.splitlines()[-1])
    states[job_id] = str(said.get("state"))
    return said


def _answered(job_dir: Path, nodes: int) -> bool:
    try:
        answer = json.loads((job_dir / "answer.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(answer.get("ok")) and answer.get("nodes") == nodes


def _gone(ids: list[str], say) -> bool:  # type: ignore[no-untyped-def]
    if wait_until(lambda: not any(in_queue(i) for i in ids), BOUND_S, 1.0):
        return True
    say(f"still in the queue {BOUND_S} s after submission: {[i for i in ids if in_queue(i)]}")
    return False


def run_shape(shape: str, base: list[str], job: Path, nodes: int, runtime: str, say, caught) -> tuple[str, list[str]]:  # type: ignore[no-untyped-def]
    """Runs one shape; ``base`` is the spec and the flags every soak job has. Returns the id
    `status` takes and the ids the job index must list once each (their states: ``states``).
    ``caught(job_dir, status)``: the node failure or preemption aimed at a neighbour that ended
    one of its jobs, if it did and the job says so (node, kind), else None."""
    return {"sweep": _sweep, "chain": _chain, "interactive": _interactive}[shape](
        base, job, nodes, runtime, say, caught
    )


def _sweep(base: list[str], job: Path, nodes: int, runtime: str, say, caught) -> tuple[str, list[str]]:  # type: ignore[no-untyped-def]
    res = cli(
        "sweep", base[0], str(job), *base[1:], "--nodes", str(nodes), "--max-concurrent", "2", "--json", "--", "3,4"
    )
    if res.returncode != 0:
        say(f"sweep exited {res.returncode}: {res.stderr.strip()[-300:]}")
        return "", []
    data = json.loads(res.stdout.splitlines()[-1])
    tasks = [(str(t["job_id"]), Path(str(t["job_dir"]))) for t in data["tasks"]]
    if not _gone([str(data["array_id"])], say):
        return str(data["array_id"]), [t for t, _ in tasks]
    hit: set[str] = set()  # tasks a neighbour's node failure or preemption ended, and which say so
    for task, job_dir in tasks:
        said = status_json(task, say)
        by = caught(job_dir, said) if said else None
        hit |= {task.rsplit("_", 1)[1]} if by else set()
        if (
            said
            and not by
            and (said.get("state") != "COMPLETED" or said.get("exit_code") != 0 or not _answered(job_dir, nodes))
        ):
            say(f"sweep task {task}: {said.get('state')}, exit {said.get('exit_code')} ({said.get('exit_reason')})")
        say_all(left_on_nodes(task, runtime, by[0] if by and by[1] == "failure" else ""), say)
    summary = cli("sweep-summary", str(data["array_id"]))  # a row per task: its index, arguments, state
    rows = [line.split() for line in summary.stdout.splitlines()]
    done = {row[0] for row in rows if len(row) > 2 and "COMPLETED" in row}
    if summary.returncode != 0 or done | hit != {t.rsplit("_", 1)[1] for t, _ in tasks}:
        said = (summary.stdout + summary.stderr)[-300:]
        say(f"sweep-summary exited {summary.returncode} without every task: {said}")
    return str(data["array_id"]), [t for t, _ in tasks]


def _chain(base: list[str], job: Path, nodes: int, runtime: str, say, caught) -> tuple[str, list[str]]:  # type: ignore[no-untyped-def]
    res = cli("submit", base[0], str(job), *base[1:], "--nodes", str(nodes), "--chain", "2", "--json", "--", "3")
    if res.returncode != 0:
        say(f"submit --chain exited {res.returncode}: {res.stderr.strip()[-300:]}")
        return "", []
    data = json.loads(res.stdout.splitlines()[-1])
    ids, dirs = [str(i) for i in data["chain"]], [Path(d) for d in data["job_dirs"]]
    if not _gone(ids, say):
        return ids[0], ids
    first, second = status_json(ids[0], say), status_json(ids[1], say)
    by = [caught(d, said) if said else None for d, said in zip(dirs, (first, second))]
    if first and not by[0] and (first.get("state") != "COMPLETED" or not _answered(dirs[0], nodes)):
        say(f"chain job 1 ({ids[0]}): {first.get('state')}, exit {first.get('exit_code')} ({first.get('exit_reason')})")
    # the run finished in job 1: job 2 is cancelled while pending, or starts and does nothing;
    # after a job 1 a neighbour's fault ended, job 2 runs the experiment again and completes
    if second and not by[1] and second.get("state") not in ("CANCELLED", "COMPLETED"):
        say(f"chain job 2 ({ids[1]}): {second.get('state')} ({second.get('exit_reason')})")
    for i, b in zip(ids, by):
        say_all(left_on_nodes(i, runtime, b[0] if b and b[1] == "failure" else ""), say)
    return ids[0], ids


def _interactive(base: list[str], job: Path, nodes: int, runtime: str, say, caught) -> tuple[str, list[str]]:  # type: ignore[no-untyped-def]
    res = cli("submit", base[0], *base[1:], "--nodes", str(nodes), "--time", "10", "--json")
    if res.returncode != 0:
        say(f"submit (interactive) exited {res.returncode}: {res.stderr.strip()[-300:]}")
        return "", []
    data = json.loads(res.stdout.splitlines()[-1])
    jid, cluster = str(data["job_id"]), Path(data["job_dir"]) / "cluster.json"
    ready = lambda: cluster.exists() and json.loads(cluster.read_text() or "{}").get("ready_time")  # noqa: E731
    wait_until(lambda: ready() or not in_queue(jid), 240, 1.0)
    ended = not in_queue(jid)  # before it was ready: a node failure aimed at a neighbour caught it
    if ended:
        said = status_json(jid, say)
        if said.get("state") == "COMPLETED" or not any(n in str(said.get("exit_reason")) for n in NODES):
            say(f"interactive {jid} ended by itself: {said.get('state')} ({said.get('exit_reason')})")
    elif not ready():
        say(f"interactive {jid}: not ready within 240 s")
    else:
        att = cli("attach", jid, "--", "python", "-c", ATTACH)
        if f"NODES {nodes}" not in att.stdout:
            say(f"attach {jid} exited {att.returncode}: {att.stdout[-200:]} {att.stderr.strip()[-300:]}")
        if nodes < len(NODES):  # a member on a node the job lacks; one still pending at the
            # command's bound is no fault of grow's (other jobs hold the nodes): teardown ends it
            grown = cli("grow", jid, "--nodes", "1", "--wait")
            joined = grown.returncode == 0 and "joined" in grown.stdout + grown.stderr
            if grown.returncode not in (0, 124) or (grown.returncode == 0 and not joined):
                say(f"grow {jid} exited {grown.returncode}: {grown.stderr.strip()[-300:]}")
            if joined:  # and released again: its SLURM job ends, the cluster goes on
                shrunk = cli("shrink", jid, "--member", "1")
                member = member_jobs_of(data["job_dir"])
                if shrunk.returncode != 0 or not wait_until(lambda: not any(in_queue(m) for m in member), 60, 1.0):
                    say(f"shrink {jid} exited {shrunk.returncode}, member {member}: {shrunk.stderr.strip()[-300:]}")
    down = cli("teardown", jid)
    # an ended job's nodes may all be busy with other jobs: teardown says so and asks to be run again
    busy = ended and down.returncode == 1 and "run teardown again" in down.stderr
    if (down.returncode != 0 and not busy) or "Traceback" in down.stderr:
        say(f"teardown {jid} exited {down.returncode}: {down.stderr.strip()[-300:]}")
    if _gone([jid], say):
        said = status_json(jid, say)
        if said and said.get("state") == "COMPLETED":
            say(f"interactive {jid} torn down says COMPLETED ({said.get('exit_reason')})")
        by = caught(Path(data["job_dir"]), said) if said else None  # a neighbour's failed node keeps its dir
        say_all(left_on_nodes(jid, runtime, by[0] if by and by[1] == "failure" else ""), say)
        members = member_jobs_of(data["job_dir"])
        if [m for m in members if in_queue(m)]:
            say(f"interactive {jid}: member jobs left in the queue: {members}")
    return jid, [jid]


def member_jobs_of(job_dir: str) -> list[str]:
    """The SLURM ids of a job's member jobs (--heal's replacements, grow's nodes)."""
    return [f.read_text().strip() for f in (Path(job_dir) / "members").glob("*.job")]


def say_all(lines: list[str], say) -> None:  # type: ignore[no-untyped-def]
    for line in lines:
        say(line)
