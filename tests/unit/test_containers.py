"""Container jobs decided before the queue and on the nodes: the working directory, the
interpreter, attach's way into the running container, the object store against /dev/shm."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_rl.config.spec import load_spec_file, parse_spec
from slurm_rl.core.errors import UsageError
from slurm_rl.core.manifest import Container
from slurm_rl.job.ray_start import OBJECT_STORE_MIN, object_store_size
from slurm_rl.login.submission.plan import container_mounts, plan_job
from slurm_rl.login.submission.render import render_job
from slurm_rl.login.submission.resolve import container_workdir, resolve_options
from slurm_rl.runtimes import runtime_of
from slurm_rl.runtimes.apptainer import OPEN_IMAGE_SHELL
from slurm_rl.slurm import SlurmClient

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]

GiB = 2**30


def _pyxis(tmp_path: Path, **extra: object):  # type: ignore[no-untyped-def]
    return parse_spec(
        {
            "cluster_name": "site",
            "fileroot": str(tmp_path / "root"),
            "container_runtime": "pyxis",
            "cpu_image": "/images/rl.sqsh",
            "python": "/opt/venv/bin/python",
            "default_mount": "/lustre:/lustre,/home/data:/data:ro",
            **extra,
        },
        "t",
    )


def test_the_container_mounts_the_fileroot_and_node_local_dir_once(tmp_path: Path) -> None:
    spec = _pyxis(tmp_path, node_local_dir="/local")
    assert container_mounts(spec) == (
        "/lustre:/lustre",
        "/home/data:/data:ro",
        f"{tmp_path}/root:{tmp_path}/root",
        "/local:/local",
    )
    # a spec mount that already provides the node-local dir is not doubled
    spec = _pyxis(tmp_path, default_mount="/tmp:/tmp")
    assert [m for m in container_mounts(spec) if m.endswith(":/tmp")] == ["/tmp:/tmp"]


def test_a_container_runs_in_the_job_dir_or_a_mounted_workdir(tmp_path: Path) -> None:
    spec = _pyxis(tmp_path)
    assert container_workdir(spec, None) == ""  # the job dir, on the always-mounted fileroot
    assert container_workdir(spec, "/lustre/alice/rl") == "/lustre/alice/rl"
    assert container_workdir(spec, "/data") == "/data"
    with pytest.raises(UsageError, match=r"^--workdir /home/alice/rl: not inside the pyxis container.*/lustre, /data"):
        container_workdir(spec, "/home/alice/rl")
    with pytest.raises(UsageError, match="--workdir /lustrefoo"):  # a prefix is not a parent
        container_workdir(spec, "/lustrefoo")
    bare = parse_spec({"cluster_name": "b", "fileroot": str(tmp_path)}, "t")
    assert container_workdir(bare, None) == str(Path.cwd().resolve())


def test_attach_joins_the_running_container_with_the_jobs_ray_variables() -> None:
    pyxis = runtime_of("pyxis")
    box = Container(runtime="pyxis", image="/i.sqsh", mounts=("/j:/j",))
    command = pyxis.attach(box, "/j", "/tmp/srl-7", ["ray", "status"], ["RAY_ADDRESS", "RAY_AUTH_MODE"], 4242)
    assert SlurmClient.attach_argv(7, "node1", command) == [
        *("srun", "--overlap", "--jobid=7", "--nodelist=node1", "--nodes=1", "--ntasks=1"),
        *("enroot", "exec", "--env", "RAY_ADDRESS", "--env", "RAY_AUTH_MODE", "4242", "ray", "status"),
    ]
    shell = SlurmClient.attach_argv(
        7, "node1", pyxis.attach(box, "/j", "/tmp/srl-7", ["bash", "-l"], [], 4242), pty=True
    )
    assert shell[-6:] == ["--pty", "enroot", "exec", "4242", "bash", "-l"]
    with pytest.raises(UsageError, match="no node_start event"):  # the node's bootstrap has not started
        pyxis.attach(box, "/j", "/tmp/srl-7", ["ray", "status"], [], None)
    # Apptainer: one more exec of the job's image with its binds, in its working directory (the
    # environment passes as it is: the job's Ray variables with it)
    sif = Container(runtime="apptainer", image="/i.sif", mounts=("/j:/j", "/tmp:/tmp"), gpus=True)
    assert runtime_of("apptainer").attach(sif, "/j/run", "/tmp/srl-7", ["ray", "status"], ["RAY_ADDRESS"], None) == [
        *(
            "sh",
            "-c",
            OPEN_IMAGE_SHELL,
            "slurm-rl-apptainer",
            "--node-temp=/tmp/srl-7",
            "--image=/i.sif",
            "apptainer",
            "exec",
            "--no-mount",
        ),
        *("home,cwd,tmp", "--pwd=/j/run", "--bind", "/j:/j", "--bind"),
        *("/tmp:/tmp", "--nv", "/i.sif", "ray", "status"),
    ]
    bare = runtime_of("none").attach(Container(), "/j", "/tmp/srl-7", ["hostname"], ["RAY_ADDRESS"], 4242)
    assert SlurmClient.attach_argv(7, "node1", bare)[-1] == "hostname"  # bare jobs: as before


@pytest.mark.parametrize(
    ("available", "shm", "size", "warns"),
    [
        (100 * GiB, 64 * GiB, 30 * GiB, False),  # Ray's default (30%) fits
        (100 * GiB, 8 * GiB, int(8 * GiB * 0.95), True),  # capped to /dev/shm, said once
        (100 * GiB, 10 * 2**20, OBJECT_STORE_MIN, True),  # never below Ray's minimum
        (1000 * GiB, 1000 * GiB, 200 * 10**9, False),  # Ray's 200 GB cap
    ],
)
def test_the_object_store_fits_dev_shm(available: int, shm: int, size: int, warns: bool) -> None:
    got, warning = object_store_size(available, shm)
    assert got == size and (warning is not None) == warns
    if warning:
        assert warning.startswith("/dev/shm has") and "larger /dev/shm" in warning


def test_a_first_submit_may_mount_the_fileroot_it_makes_but_not_a_missing_dir(tmp_path: Path) -> None:
    """A new site's spec mounts its fileroot (the lab's own specs do) before any job made it:
    submit makes the fileroot before the job starts, so only a mount nothing makes is refused."""
    from slurm_rl.login.submission.preflight import check_node_paths
    from slurm_rl.login.submission.resolve import resolve_options

    exp, image = tmp_path / "exp.py", tmp_path / "rl.sqsh"
    exp.write_text("print('hi')\n")
    image.write_bytes(b"hsqs")
    root = tmp_path / "shared" / "srl"  # not made yet; tmp_path's filesystem: seen alike by the nodes
    for mount, refused in ((f"{root}:{root}", False), (f"{root.parent}:/shared", False), (f"{tmp_path}/data:/d", True)):
        spec = _pyxis(tmp_path, fileroot=str(root), node_local_dir="/local", default_mount=mount, cpu_image=str(image))
        opts = resolve_options(spec, str(exp), user="u")
        if refused:
            with pytest.raises(UsageError, match=f"default_mount {mount}: {tmp_path}/data does not exist"):
                check_node_paths(plan_job(spec, opts))
        else:
            check_node_paths(plan_job(spec, opts))  # no error


@pytest.mark.parametrize(
    ("flags", "node_dir"),
    [
        ({}, "/tmp/srl-$SLURM_JOB_ID"),
        ({"array": "0-3"}, "/tmp/srl-${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"),  # a sweep's task
    ],
)
def test_an_image_apptainer_extracts_goes_into_the_node_dir_the_jobs_cleanup_removes(
    tmp_path: Path, flags: dict[str, str], node_dir: str
) -> None:
    """Where a user may not mount the image (no /dev/fuse), Apptainer extracts it into the job's
    node-local dir: the one its node cleanup removes, keyed as that cleanup keys it, a sweep's
    task and a member job (--heal's replacements, which join another job's dir) included."""
    spec = load_spec_file(REPO / "cluster_specs" / "example-apptainer.json")
    (tmp_path / "e.py").write_text("")
    opts = resolve_options(spec, str(tmp_path / "e.py"), user="alice", nodes=2, heal=1, **flags)
    job = render_job(plan_job(spec, opts))
    assert f'slurm-rl-apptainer --node-temp="{node_dir}" --image=' in job.script
    if not flags:  # the member job's steps: the dir of the job it joins, not their own id
        assert 'slurm-rl-apptainer --node-temp="/tmp/srl-${SLURM_RL_JOB_DIR##*/}" --image=' in job.member_script
