"""The submitit-style Python API on the lab: a function runs as the driver of a 3-node job and
its value (or its traceback) comes back to the caller. The caller is a Python process of its own,
run as the lab test's user (an ordinary one in the README's command), as a user's script is."""

from __future__ import annotations

import getpass
import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.conftest import CLI_USER, REPO, python_argv
from tests.lab.helpers import SPEC, assert_no_leftovers

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(240)]


def caller(script: str) -> dict:
    """Run SCRIPT (it ends by printing one JSON line) as the test's user; that line."""
    code = f"import json, slurm_rl\nSPEC = {str(SPEC)!r}\n" + textwrap.dedent(script)
    res = subprocess.run(python_argv("-c", code), capture_output=True, text=True, timeout=200, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.splitlines()[-1])


def test_a_function_runs_on_the_job_cluster_and_returns(lab: list[str]) -> None:
    seen = caller(
        """
        def count_nodes(scale: int) -> dict:
            import ray

            from slurm_rl.distributed import init_ray

            branch = init_ray()
            return {"branch": branch, "nodes": scale * len([n for n in ray.nodes() if n["Alive"]])}

        job = slurm_rl.submit(SPEC, count_nodes, 10, nodes=3, job_options={"name": "api-ok"})
        value = job.result()
        print(json.dumps({"value": value, "job_id": job.job_id, "job_dir": str(job.paths.job_dir),
                          "call_result": job.paths.call_result.exists()}))
        """
    )
    assert seen["value"] == {"branch": "slurm_managed", "nodes": 30}
    job_dir = Path(seen["job_dir"])
    assert seen["call_result"] and job_dir.name == str(seen["job_id"])
    assert job_dir.owner() == (CLI_USER["name"] or getpass.getuser())  # the caller's
    assert_no_leftovers(lab, seen["job_id"])


def test_a_raising_function_gives_its_remote_traceback(lab: list[str]) -> None:
    seen = caller(
        """
        from submitit.core.utils import FailedJobError

        def boom() -> None:
            raise KeyError("no such checkpoint")

        job = slurm_rl.submit(SPEC, boom, nodes=1, job_options={"name": "api-fail"})
        try:
            job.result()
            raised = None
        except FailedJobError as e:
            raised = str(e)
        print(json.dumps({"raised": raised, "done": job.done()}))
        """
    )
    assert seen["raised"] is not None and "KeyError: 'no such checkpoint'" in seen["raised"], seen
    assert seen["done"]
