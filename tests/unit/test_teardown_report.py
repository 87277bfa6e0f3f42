"""teardown's pieces without a cluster: reading the per-node JSON lines, merging the forced and
the final pass per node, and building the cleanup step where the job ran (manifest)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from slurm_rl.core.manifest import Container, JobManifest
from slurm_rl.core.paths import JobPaths
from slurm_rl.login.teardown import cleanup_command, merge_reports, parse_reports


def test_parse_reports_keeps_only_node_reports() -> None:
    stdout = (
        'srun: warning: something\n{"node": "node1", "killed": []}\nnot json\n[1, 2]\n'
        '{"no_node": 1}\n{"node": "node2", "killed": [{"pid": 5}]}\n'
    )
    assert [r["node"] for r in parse_reports(stdout)] == ["node1", "node2"]


def test_merge_reports_adds_both_passes_per_node() -> None:
    forced = [
        {
            "node": "node2",
            "killed": [{"pid": 1, "name": "raylet", "signal": "KILL"}],
            "temp_dir_removed": False,
            "seconds": 0.5,
        }
    ]
    final = [
        {"node": "node1", "killed": [], "temp_dir_removed": True, "seconds": 0.25},
        {
            "node": "node2",
            "killed": [{"pid": 2, "name": "gcs_server", "signal": "TERM"}],
            "temp_dir_removed": True,
            "seconds": 0.25,
        },
    ]
    merged = merge_reports(forced, final)
    assert [m["node"] for m in merged] == ["node1", "node2"]
    assert [k["pid"] for k in merged[1]["killed"]] == [1, 2]
    assert merged[1]["temp_dir_removed"] and merged[1]["seconds"] == pytest.approx(0.75)
    assert merge_reports([], []) == []


def _manifest(container: Container) -> JobManifest:
    return JobManifest(
        slurm_rl_version="t",
        cluster_name="c",
        name="n",
        user="u",
        nodes=2,
        python="/shared/venv/bin/python",
        workdir="/w",
        experiment_src_dir="/w",
        container=container,
    )


@pytest.mark.parametrize(
    ("container", "flags", "prefix"),
    [
        (Container(), [], []),
        (
            Container(runtime="pyxis", image="nvcr.io/x:1", mounts=("/a:/a",), workdir="/w"),
            [
                "--container-image=nvcr.io/x:1",
                "--container-mounts=/a:/a",
                "--container-name=slurm-rl-42",
                "--no-container-mount-home",
                "--container-workdir=/w",
            ],
            [],
        ),
        (
            Container(runtime="apptainer", image="/img.sif", mounts=("/a:/a",), workdir="/w", gpus=True),
            [],
            ["apptainer", "exec", "--containall", "--pwd", "/w", "--bind", "/a:/a", "--nv", "/img.sif"],
        ),
    ],
)
def test_cleanup_runs_with_the_jobs_python_inside_its_container(
    tmp_path: Path, container: Container, flags: list[str], prefix: list[str]
) -> None:
    paths = JobPaths(tmp_path)
    _manifest(container).write(paths.manifest)
    got_flags, argv = cleanup_command(paths, 42, 0.5)
    assert got_flags == flags
    assert argv == [
        *prefix,
        "/shared/venv/bin/python",
        "-m",
        "slurm_rl.job.cleanup",
        "--job-id",
        "42",
        "--grace-s",
        "0.5",
    ]


def test_cleanup_of_a_job_dir_without_manifest_uses_this_python(tmp_path: Path) -> None:
    flags, argv = cleanup_command(JobPaths(tmp_path), 42, 1.0)
    assert flags == [] and argv[0] == sys.executable
