"""`attach` decided without click, and `status`/`list` asking SLURM twice for all their jobs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_rl.core.errors import UsageError
from slurm_rl.core.manifest import JobManifest
from slurm_rl.core.paths import JobPaths
from slurm_rl.login.attach import plan_attach
from slurm_rl.login.reading.lookup import job_states
from slurm_rl.slurm import Completed, SlurmClient

pytestmark = pytest.mark.unit


def job(tmp_path: Path, job_id: str, **manifest: object) -> JobPaths:
    paths = JobPaths(tmp_path / "alice" / "exp" / job_id)
    paths.logs.mkdir(parents=True)
    JobManifest(
        slurm_rl_version="t", cluster_name="c", name="exp", user="alice", nodes=1, workdir="/",
        experiment_src_dir="/", experiment="x.py", **{"python": "py", **manifest},
    ).write(paths.manifest)  # fmt: skip
    return paths


class Slurm:
    """squeue knows job 11 (running), sacct knows 12 (completed); 13 is forgotten."""

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []

    def __call__(self, argv: list[str], timeout: float) -> Completed:
        self.argvs.append(list(argv))
        if argv[0] == "squeue":
            return Completed(0, "11|RUNNING|node[1-2]|None\n", "")
        if argv[0] == "sacct":
            return Completed(0, "12|COMPLETED|node1|0:0\n", "")
        return Completed(1, "", "")


def test_the_states_of_many_jobs_take_two_slurm_calls(tmp_path: Path) -> None:
    dirs = [job(tmp_path, j) for j in ("11", "12", "13", "local-20261125-120000-1")]
    slurm = Slurm()
    states = job_states(dirs, SlurmClient(slurm))
    assert [a[0] for a in slurm.argvs if a != ["sinfo", "--version"]] == ["squeue", "sacct"]  # and a local read
    assert {k: s.state for k, s in states.items()} == {
        "11": "RUNNING", "12": "COMPLETED", "13": "UNKNOWN", "local-20261125-120000-1": "RUNNING",
    }  # fmt: skip


def test_attach_plans_a_shell_on_the_head_node_with_the_jobs_ray(tmp_path: Path) -> None:
    paths = job(tmp_path, "11", python="/opt/venv/bin/python", setup=("module load cuda",))
    paths.cluster.write_text(json.dumps({"address": "10.0.0.1:6379", "head_node": "node1", "head_ip": "10.0.0.1"}))
    paths.spec.write_text(json.dumps({"env": {"HF_HOME": "/shared/hf"}}))
    plan = plan_attach(11, paths, SlurmClient(Slurm()), [], dashboard=False, via_client=False)
    assert plan.argv[0] == "srun" and "--pty" in plan.argv and "node1" in " ".join(plan.argv)
    # the job's environment, as the driver has it: spec env, setup lines, the interpreter's dir
    prelude = plan.argv[plan.argv.index("-c") + 1]
    assert "export HF_HOME=/shared/hf" in prelude and "module load cuda" in prelude
    assert 'PATH=/opt/venv/bin:"$PATH"' in prelude and plan.argv[-2:] == ["bash", "-i"]
    one = plan_attach(11, paths, SlurmClient(Slurm()), ["ray", "status"], dashboard=False, via_client=False)
    assert one.argv[-2:] == ["ray", "status"] and "--pty" not in one.argv
    assert plan.env["RAY_ADDRESS"] == "10.0.0.1:6379" and plan.env["RAY_AUTH_TOKEN_PATH"] == str(paths.ray_auth_token)
    assert "node1" in plan.note and "RAY_ADDRESS=10.0.0.1:6379" in plan.note
    cluster = {"address": "10.0.0.1:6379", "head_node": "node1", "head_ip": "10.0.0.1", "nodes": ["node1", "node2"]}
    paths.cluster.write_text(json.dumps(cluster))
    second = plan_attach(11, paths, SlurmClient(Slurm()), ["hostname"], dashboard=False, via_client=False, node="node2")
    assert "--nodelist=node2" in second.argv and "node1" not in " ".join(second.argv)
    with pytest.raises(UsageError, match=r"job 11 has no node 'node9'; its nodes: node1, node2"):
        plan_attach(11, paths, SlurmClient(Slurm()), [], dashboard=False, via_client=False, node="node9")
    with pytest.raises(UsageError, match="without --dashboard"):
        plan_attach(11, paths, SlurmClient(Slurm()), [], dashboard=True, via_client=False)
    with pytest.raises(UsageError, match="serves no Ray Client"):
        plan_attach(11, paths, SlurmClient(Slurm()), ["python"], dashboard=False, via_client=True)


def test_attach_to_an_ended_job_or_one_not_up_yet_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"job 12 has ended \(COMPLETED\).*slurm-rl logs 12"):
        plan_attach(12, job(tmp_path, "12"), SlurmClient(Slurm()), [], dashboard=False, via_client=False)
    with pytest.raises(UsageError, match=r"no cluster\.json yet"):
        plan_attach(11, job(tmp_path, "11"), SlurmClient(Slurm()), [], dashboard=False, via_client=False)
