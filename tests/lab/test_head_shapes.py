"""A CPU-only Ray head on the lab: as one more node of the job (--head-node cpu) and as the
first component of a SLURM heterogeneous job (head on the CPU partition, workers on the "GPU"
partition, one sbatch with hetjob components)."""

from __future__ import annotations

import pytest

from tests.lab.helpers import assert_no_leftovers, job_dir, submit, tagged_json

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(300)]


def _report(data: dict) -> dict:
    log = (job_dir(data) / "logs" / "driver.log").read_text()
    return tagged_json(log, "REPORT")


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(("--head-node", "cpu"), marks=pytest.mark.smoke),
        # the hetjob shape is in the smoke set as test_gpu_lab's cpu-head-hetjob (the same sbatch)
        ("--head-partition", "labcpu", "--partition", "labgpu"),
    ],
    ids=["cpu-head", "hetjob"],
)
def test_a_cpu_only_head_runs_the_driver_and_no_ray_work(lab: list[str], extra: tuple[str, ...]) -> None:
    res, data = submit("check_cluster.py", "3", nodes=2, extra=extra)
    assert res.returncode == 0, (res.stderr[-1500:], (job_dir(data) / "logs" / "driver.log").read_text()[-1500:])
    report = _report(data)
    assert report["nodes"] == 3 and report["tags"], report
    assert report["cpus_by_ip"][report["driver_ip"]] == 0, report  # the head offers Ray nothing
    assert sorted(v for ip, v in report["cpus_by_ip"].items() if ip != report["driver_ip"]) == [2, 2], report
    assert data["nodes"] == 3
    if "--head-partition" in extra:
        script = (job_dir(data) / "sbatch.sh").read_text()
        assert "#SBATCH hetjob" in script and "--partition=labcpu" in script
        assert "srun --nodes=1 --ntasks=1 " in script and "  : --nodes=2 --ntasks=2 " in script  # each component
        assert report["driver_ip"] == "10.77.0.11"  # labcpu is node1
    assert_no_leftovers(lab, data["job_id"])
