"""`slurm-rl doctor` over recorded SLURM answers (the 24.11 lab's): each check's line, and each
broken setting as its own ✗ with the fix; the probe's node report judged without a job."""

from __future__ import annotations

import platform
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

import pytest

from slurm_rl.config.spec import parse_spec
from slurm_rl.login.doctor import site_checks
from slurm_rl.login.doctor_probe import judge, not_probed
from slurm_rl.slurm import Completed, SlurmClient

SINFO_NODES = "lab*|node1|4|4000|gpu:labgpu:4|infinite\nlab*|node2|4|4000|gpu:labgpu:4|infinite\n"
CONFIG = (
    "Configuration data as of 2026-11-25T19:00:00\nProctrackType           = proctrack/linuxproc\n"
    "TaskPlugin              = task/affinity\nTopologyPlugin          = topology/tree\n"
    "PlugStackConfig         = (null)\nSLURM_CONF              = /nonexistent/slurm.conf\n"
)


def client(slurm: str = "slurm 24.11.5\n", sacctmgr: bool = True, nodes: str = SINFO_NODES) -> SlurmClient:
    table = {  # a command not here fails the test (StopIteration): doctor asks nothing else
        "sinfo --version": Completed(0, slurm, ""),
        "sinfo -h -N": Completed(0, nodes, ""),
        "scontrol show config": Completed(0, CONFIG, ""),
        "sacctmgr -n -P show assoc": Completed(0, "lab||high,normal|normal\nrl||normal|normal\n", "")
        if sacctmgr
        else Completed(1, "", "sacctmgr: error: Problem talking to the database\n"),
        "sacctmgr -n -P show qos": Completed(0, "normal|||\n", ""),
    }

    def runner(argv: Sequence[str], timeout_s: float) -> Completed:
        line = " ".join(argv)
        return next(answer for prefix, answer in table.items() if line.startswith(prefix))

    return SlurmClient(runner)


def spec(**fields: object):  # type: ignore[no-untyped-def]
    return parse_spec({"cluster_name": "lab", "fileroot": "/var/tmp/srl", "partition": "lab", **fields})


def test_a_site_that_fits_the_spec_is_all_ok() -> None:
    checks = site_checks(spec(), client(), "alice")
    assert [c.name for c in checks] == [
        "slurm", "partition", "account", "qos", "process tracking", "cgroup", "topology", "gpus",
        "container runtime",
    ]  # fmt: skip
    assert {c.status for c in checks} == {"ok"}, [c.line() for c in checks]
    assert (
        checks[0].line()
        == "✓ slurm: SLURM 24.11.5; slurm-rl supports SLURM 22.05 or newer (proven on 22.05, 24.11, 26.05)"
    )
    assert checks[1].found == "lab: 2 nodes, up to 4 CPUs, 4 GPUs per node, no time limit"
    assert checks[7].found == "lab: gpu:labgpu:4 on 2 nodes (typed)"


@pytest.mark.parametrize(
    ("fields", "name", "found", "fix"),
    [
        ({"partition": "gpu"}, "partition", "'gpu' does not exist (partitions: lab)", "set the spec's 'partition'"),
        ({"account": "x"}, "account", "'x' is not one of alice's accounts (lab, rl)", "set the spec's 'account'"),
        ({"qos": "high", "account": "rl"}, "qos", "'high' is not allowed for alice (normal)", "set the spec's 'qos'"),
        (
            {"container_runtime": "pyxis", "python": "python3", "cpu_image": "i.sqsh"},
            "pyxis",
            "no Pyxis in plugstack.conf, the spec wants it",
            "container_runtime",
        ),
        ({"segment": 2}, "topology", "topology/tree: Ray nodes know their switch; --segment needs Topology", "segment"),
    ],
)
def test_each_broken_setting_is_one_fail_with_its_fix(fields: dict, name: str, found: str, fix: str) -> None:
    checks = site_checks(spec(**fields), client(), "alice")
    failed = [c for c in checks if c.status == "fail"]
    assert [c.name for c in failed] == [name], [c.line() for c in checks]
    assert failed[0].found.startswith(found) and fix in failed[0].fix and failed[0].line().startswith("✗ ")


def test_an_old_slurm_stops_at_the_first_line_and_no_accounting_is_a_warning() -> None:
    old = site_checks(spec(), client("slurm-wlm 21.08.8\n"), "alice")
    assert [(c.name, c.status) for c in old] == [("slurm", "fail")]
    assert old[0].found == "this site runs SLURM 21.08.8"
    quiet = site_checks(spec(), client(sacctmgr=False), "alice")
    assert [c.status for c in quiet if c.name == "accounting"] == ["warn"]


def test_gpus_come_from_the_node_table_and_two_types_want_a_choice() -> None:
    mixed = SINFO_NODES.replace("node2|4|4000|gpu:labgpu:4", "node2|4|4000|gpu:h100:8(S:0-1),nvme:1")
    gpus = site_checks(spec(), client(nodes=mixed), "alice")[7]
    assert (gpus.status, gpus.found) == ("warn", "lab: gpu:h100:8,gpu:labgpu:4 on 2 nodes (typed)")
    assert "gpu_type" in gpus.fix
    assert site_checks(spec(gpu_type="h100"), client(nodes=mixed), "alice")[7].status == "ok"
    bare = site_checks(spec(gpus_per_node=2), client(nodes=SINFO_NODES.replace("gpu:labgpu:4", "(null)")), "alice")
    assert (bare[7].status, bare[7].found) == ("fail", "no GPU GRES in any partition")


def _node(**changes: object) -> dict:
    node = {
        "host": "node3", "python": platform.python_version(), "ray": version("ray"), "slurm_rl": "0",
        "fileroot_error": "", "interfaces": "eth0 10.77.0.13", "address": "10.77.0.13 (its name)",
        "network_error": "", "ephemeral": "32768-60999", "ports_ok": True,
    }  # fmt: skip
    return {**node, **changes}


def test_the_probe_report_is_judged_check_by_check(tmp_path: Path) -> None:
    marker = tmp_path / "m"
    marker.write_text("node3")
    assert {c.status for c in judge(spec(), _node(), marker)} == {"ok"}
    unseen = judge(spec(), _node(), tmp_path / "gone")
    assert [c.name for c in unseen if c.status == "fail"] == ["fileroot"]
    assert "this login node does not see it" in unseen[1].found and "shared" in unseen[1].fix
    other = judge(spec(), _node(python="3.9.1", ray="2.10.0"), marker)
    assert [c.name for c in other if c.status == "fail"] == ["python and ray"]
    assert other[-1].found.startswith("node3: Python 3.9, Ray 2.10.0; here: Python ")
    assert [c.status for c in not_probed(spec())] == ["skip"] * 4


@pytest.mark.parametrize("scope", ["", " container_scope=global", " container_scope=job"])
def test_the_image_cache_follows_pyxis_container_scope(tmp_path: Path, scope: str, capsys) -> None:  # type: ignore[no-untyped-def]
    from slurm_rl.login.submission.plan import site_runtime

    (tmp_path / "plugstack.conf").write_text(f"include {tmp_path}/plugstack.conf.d/*\n")
    (tmp_path / "plugstack.conf.d").mkdir()
    (tmp_path / "plugstack.conf.d" / "pyxis.conf").write_text(f"required /usr/lib/spank_pyxis.so{scope}\n")
    config = CONFIG.replace("(null)", str(tmp_path / "plugstack.conf"))
    slurm = client_with_config(config)
    boxed = spec(container_runtime="pyxis", python="python3", cpu_image="/i.sqsh")
    pyxis = next(c for c in site_checks(boxed, slurm, "alice") if c.name == "pyxis")
    if scope.endswith("job"):  # pyxis names every container after its job: nothing to start from
        assert site_runtime(boxed, slurm).image_cache is False
        assert "image cache is off" in capsys.readouterr().err
        assert pyxis.status == "warn" and "container_scope=job" in pyxis.found
    else:  # global, pyxis' default
        assert site_runtime(boxed, slurm) is boxed
        assert pyxis.status == "ok" and pyxis.found.endswith("container_scope=global, image cache on")


def client_with_config(config: str) -> SlurmClient:
    base = client()
    answer = base.runner

    def runner(argv: Sequence[str], timeout_s: float) -> Completed:
        return Completed(0, config, "") if list(argv[:3]) == ["scontrol", "show", "config"] else answer(argv, timeout_s)

    return SlurmClient(runner)


def test_the_probe_never_makes_the_fileroot_dir_it_was_sent_to_check(tmp_path) -> None:
    """The login node made the marker's dir; a node that does not share it must say so, not make
    its own copy (then the login node would only see a marker missing, and not why)."""
    from slurm_rl.job.probe import probe

    marker = tmp_path / "made-on-login" / "marker"
    out = probe(str(marker), "")
    assert "No such file" in str(out["fileroot_error"]) and not marker.parent.exists(), out
    marker.parent.mkdir()
    assert probe(str(marker), "")["fileroot_error"] == "" and marker.read_text() == out["host"]
