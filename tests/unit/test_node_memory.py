"""A node's Ray plans with what SLURM gave the job there (allocation or memory cgroup), not the
host's memory: fake /proc/self/cgroup and cgroup trees, as SLURM's task/cgroup lays them out."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_rl.job.memory import (
    DAEMON_RESERVE,
    MIB,
    MemoryLimit,
    OomWatch,
    cgroup_limit,
    memory_cgroup,
    node_memory_limit,
    oom_kills,
    ray_memory,
    slurm_limit,
)

pytestmark = pytest.mark.unit
GIB = 2**30


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SLURM_MEM_PER_NODE": "2000"}, 2000 * MIB),
        ({"SLURM_MEM_PER_CPU": "1000", "SLURM_CPUS_ON_NODE": "2"}, 2000 * MIB),
        ({"SLURM_MEM_PER_NODE": "0"}, None),  # --mem=0: all of the node's memory, no number
        ({"SLURM_MEM_PER_CPU": "1000"}, None),
        ({}, None),
    ],
)
def test_slurm_limit(env: dict[str, str], expected: int | None) -> None:
    got = slurm_limit(env)
    assert (got.bytes if got else None) == expected


def slurm_v1_tree(root: Path, job_limit: int, step_limit: str = "9223372036854771712") -> Path:
    """/sys/fs/cgroup/memory/slurm_node2/uid_0/job_7/step_0/task_0, as SLURM's cgroup/v1 makes it."""
    job = root / "memory" / "slurm_node2" / "uid_0" / "job_7"
    task = job / "step_0" / "task_0"
    task.mkdir(parents=True)
    (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (job / "memory.limit_in_bytes").write_text(f"{job_limit}\n")
    (job / "step_0" / "memory.limit_in_bytes").write_text(f"{step_limit}\n")
    (task / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    return task


def test_cgroup_v1_the_jobs_limit_above_the_task(tmp_path: Path) -> None:
    task = slurm_v1_tree(tmp_path, 2000 * MIB)
    proc = tmp_path / "cgroup"
    proc.write_text("12:pids:/\n4:memory:/slurm_node2/uid_0/job_7/step_0/task_0\n1:name=systemd:/\n")
    assert memory_cgroup(str(proc), str(tmp_path)) == task
    got = cgroup_limit(task, str(tmp_path))
    assert got is not None and got.bytes == 2000 * MIB and "job_7" in got.source


def test_cgroup_v2_unified(tmp_path: Path) -> None:
    leaf = tmp_path / "system.slice" / "slurmstepd.scope" / "job_7" / "step_0" / "user" / "task_0"
    leaf.mkdir(parents=True)
    (leaf.parent.parent.parent / "memory.max").write_text(f"{3 * GIB}\n")
    (leaf / "memory.max").write_text("max\n")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_0\n")
    found = memory_cgroup(str(proc), str(tmp_path))
    assert found == leaf
    got = cgroup_limit(found, str(tmp_path))
    assert got is not None and got.bytes == 3 * GIB


def test_the_smaller_of_slurm_and_cgroup(tmp_path: Path) -> None:
    task = slurm_v1_tree(tmp_path, 1500 * MIB)
    got = node_memory_limit({"SLURM_MEM_PER_NODE": "2000"}, cgroup=task, root=str(tmp_path))
    assert got is not None and got.bytes == 1500 * MIB
    assert node_memory_limit({}, cgroup=tmp_path / "nowhere", root=str(tmp_path)) is None


def test_ray_memory_fits_the_limit() -> None:
    limit = MemoryLimit(2000 * MIB, "SLURM_MEM_PER_NODE=2000")
    budget, warning = ray_memory(limit, available=16 * GIB, shm_free=8 * GIB)
    assert warning is None
    assert budget.object_store == int(2000 * MIB * 0.3)  # Ray's proportion, of the job's share
    assert budget.memory is not None
    assert budget.memory + budget.object_store + DAEMON_RESERVE == 2000 * MIB
    assert "2000 MiB (SLURM_MEM_PER_NODE=2000)" in budget.note


def test_ray_memory_without_a_limit_is_rays_own() -> None:
    budget, _ = ray_memory(None, available=10 * GIB, shm_free=8 * GIB)
    assert budget.memory is None and budget.object_store == 3 * GIB


def test_ray_memory_small_shm_warns() -> None:
    budget, warning = ray_memory(MemoryLimit(8 * GIB, "x"), available=16 * GIB, shm_free=64 * MIB)
    assert warning and "/dev/shm" in warning
    assert budget.object_store == 75 * MIB  # Ray's minimum


def test_oom_kills_v1_counts_the_job_and_step_levels(tmp_path: Path) -> None:
    task = slurm_v1_tree(tmp_path, 2000 * MIB)
    for level, kills in ((task, 0), (task.parent, 2), (task.parent.parent, 1)):
        (level / "memory.oom_control").write_text(f"oom_kill_disable 0\nunder_oom 0\noom_kill {kills}\n")
    assert oom_kills(task, str(tmp_path)) == 3


def test_oom_watch_reports_new_kills_once_naming_the_limit(tmp_path: Path) -> None:
    leaf = tmp_path / "job_7" / "step_0"
    leaf.mkdir(parents=True)
    events = leaf / "memory.events"
    events.write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")  # a kill before the node started
    watch = OomWatch(MemoryLimit(2000 * MIB, "SLURM_MEM_PER_NODE=2000"), every_s=0.0, cgroup=leaf, root=str(tmp_path))
    assert oom_kills(leaf, str(tmp_path)) == 1
    assert watch.poll() is None  # nothing new
    events.write_text("low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\n")
    assert watch.poll() == (1, "2000 MiB (SLURM_MEM_PER_NODE=2000)")
    assert watch.poll() is None
