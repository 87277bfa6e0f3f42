"""Driver: worker-group failures on the 3-node lab. A worker on node 2 is killed mid-call
(SIGKILL from a task on node 2), restarted, killed past max_restarts; a gloo group re-forms
after a restart; a stuck call is reported with its stack; a memory hog is stopped; and last, all
of node 2's Ray processes are killed while calls run. Writes reliability.json into the job dir
after every step.

    reliability.py REPO
"""

import json
import os
import sys
import time
from pathlib import Path

repo = sys.argv[1]
sys.path.insert(0, repo)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))

import ray  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from slurm_rl.distributed import RayVirtualCluster, RayWorkerGroup, WorkerFailureError, init_ray  # noqa: E402

PROBE, GLOO = "tests.unit.workers.reliable.ProbeWorker", "tests.unit.workers.reliable.GlooRank"
out_path = Path(os.environ["SLURM_RL_JOB_DIR"]) / "reliability.json"
out: dict = {}


def save(key: str, value: object) -> None:
    out[key] = value
    out_path.write_text(json.dumps(out, indent=1))
    print(key, json.dumps(value)[:400], flush=True)


def on_node(host: str, fn, *args):  # type: ignore[no-untyped-def]
    """Run fn(*args) in a zero-CPU task on the lab node named host."""
    node_id = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeManagerHostname"] == host)
    return (
        ray.remote(num_cpus=0)(fn)
        .options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False))
        .remote(*args)
    )


def sigkill(pid: int) -> None:
    os.kill(pid, 9)


def kill_ray_here() -> None:
    """SIGKILL every Ray process of this job on this node: all descendants of the node's
    slurm-rl bootstrap (which stays, as does the allocation), this task's own worker last."""
    import psutil

    me = psutil.Process()
    boot = next(p for p in me.parents() if "slurm_rl.job" in " ".join(p.cmdline()))
    for proc in boot.children(recursive=True):
        if proc.pid != me.pid:
            try:
                proc.kill()
            except psutil.Error:
                pass
    me.kill()


def worker_on(group: RayWorkerGroup, host: str) -> dict:
    return next(s for s in group.get_worker_status() if s["node"].startswith(host))


def fails_within(group: RayWorkerGroup, refs) -> tuple[float, str, list]:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    try:
        group.get_results(refs)
    except WorkerFailureError as exc:
        return round(time.monotonic() - t0, 2), str(exc), exc.worker_indices
    return -1.0, "no error", []


init_ray()
# A bundle of 2 CPUs fills a lab node (2 CPUs), so the three placement groups land on three nodes,
# as full-node bundles do on a GPU cluster; the workers take 1 CPU of it.
cluster = RayVirtualCluster(
    [1, 1, 1], use_gpus=False, max_colocated_worker_groups=2, communication_backend="gloo", name="reliability"
)

# 1. kill a worker on node 2 mid-call; restart; the same call works; past max_restarts: clear error
group = RayWorkerGroup(cluster, PROBE, name_prefix="probe", max_restarts=1)
victim = worker_on(group, "node2")
refs = group.run_all_workers_single_data("sleep", 8)
time.sleep(1)
ray.get(on_node("node2", sigkill, victim["pid"]))
save("killed_mid_call", (*fails_within(group, refs), victim["worker"]))
save("restarted", group.restart_failed_workers())
save("same_call_after_restart", group.get_results(group.run_all_workers_single_data("sleep", 0.1)))
ray.get(on_node("node2", sigkill, worker_on(group, "node2")["pid"]))
save("killed_again", fails_within(group, group.run_all_workers_single_data("noop"))[1:])
try:
    group.restart_failed_workers()
    save("past_max_restarts", "restarted anyway")
except WorkerFailureError as exc:
    save("past_max_restarts", str(exc))
group.shutdown(force=True)

# 2. a stuck call is found, with its stack; the status and usage tables
group = RayWorkerGroup(cluster, PROBE, name_prefix="stuck")
group.run_single_worker_single_data("sleep", 2, 120)  # killed by the shutdown below
time.sleep(2.5)
group.print_worker_status()
group.print_resource_usage()
stuck = group.detect_stuck_workers(timeout_s=2.0)
save("stuck", [{k: s[k] for k in ("worker", "node", "current_call", "running_s", "stack")} for s in stuck])
group.shutdown(force=True)

# 3. gloo: 3 ranks all-reduce, the rank on node 2 dies, restart, all-reduce again
group = RayWorkerGroup(cluster, GLOO, name_prefix="gloo", max_restarts=2)
first = group.get_results(group.run_all_workers_single_data("allreduce", 1.0))
ray.get(on_node("node2", sigkill, worker_on(group, "node2")["pid"]))
fails_within(group, group.run_all_workers_single_data("pid"))
group.restart_failed_workers()
save("gloo", [first, group.get_results(group.run_all_workers_single_data("allreduce", 2.0))])
group.shutdown(force=True)

# 4. memory_limit: the worker on node 2 allocates past it and is stopped; the others answer
group = RayWorkerGroup(cluster, PROBE, name_prefix="mem", memory_limit="300MB")
hog = worker_on(group, "node2")["worker"]
refs = [group.run_single_worker_single_data("hog", hog, 700)]
from slurm_rl.distributed._engine.futures import WorkerRefs  # noqa: E402

save(
    "memory",
    [
        *fails_within(group, WorkerRefs(refs, [hog])),
        ray.get([group.run_single_worker_single_data("noop", w) for w in range(3) if w != hog]),
    ],
)
group.shutdown(force=True)

# 5. a node loses every Ray process while calls run (the job keeps its allocation). 1-CPU bundles
# this time, so that the lost node's bundle finds room on a surviving node afterwards.
cluster.shutdown()
cluster = RayVirtualCluster([1, 1, 1], use_gpus=False, name="lost")
group = RayWorkerGroup(cluster, PROBE, name_prefix="lost")
hosts = [s["node"].split()[0] for s in group.get_worker_status()]
victim = "node2" if "node2" in hosts else next(h for h in hosts if h != "node1")  # node1 runs the driver
refs = group.run_all_workers_single_data("sleep", 14)  # still running when the node is declared lost (~10 s)
time.sleep(1)
on_node(victim, kill_ray_here)
save("node_lost", [*fails_within(group, refs), victim])
# its bundle's placement group moves to a surviving node with room; the worker restarts there
save(
    "restarted_elsewhere",
    [
        group.restart_failed_workers(),
        group.get_results(group.run_all_workers_single_data("sleep", 0.1)),
        sorted(s["node"].split()[0] for s in group.get_worker_status()),
    ],
)
