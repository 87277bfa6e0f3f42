"""The submitit-style Python API on the lab: a function runs as the driver of a 3-node job and
its value (or its traceback) comes back to the caller."""

from __future__ import annotations

import pytest
from submitit.core.utils import FailedJobError

import slurm_rl
from tests.lab.helpers import SPEC, assert_no_leftovers

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(240)]


def test_a_function_runs_on_the_job_cluster_and_returns(lab: list[str]) -> None:
    def count_nodes(scale: int) -> dict:
        import ray

        from slurm_rl.distributed import init_ray

        branch = init_ray()
        return {"branch": branch, "nodes": scale * len([n for n in ray.nodes() if n["Alive"]])}

    job = slurm_rl.submit(SPEC, count_nodes, 10, nodes=3, job_options={"name": "api-ok"})
    assert job.result() == {"branch": "slurm_managed", "nodes": 30}
    assert job.paths.call_result.exists() and job.paths.job_dir.name == str(job.job_id)
    assert_no_leftovers(lab, job.job_id)


def test_a_raising_function_gives_its_remote_traceback(lab: list[str]) -> None:
    def boom() -> None:
        raise KeyError("no such checkpoint")

    job = slurm_rl.submit(SPEC, boom, nodes=1, job_options={"name": "api-fail"})
    with pytest.raises(FailedJobError, match="KeyError: 'no such checkpoint'"):
        job.result()
    assert job.done()
