"""Clusters by name (issue 80 item 2): `slurm-rl clusters add|remove`, the file where users keep
such things, `--cluster NAME` on submit and every job command through the one mechanism (the
command's spec and login host), a cluster's own SLURM config, and bad input as one line, exit 2,
nothing submitted."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from slurm_rl.config.clusters import clusters_path, load_clusters
from slurm_rl.core.job_env import Settings
from slurm_rl.login.cli import cli
from slurm_rl.login.commands.job_command import RemoteCommand
from slurm_rl.slurm import Completed, SlurmClient
from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.unit
LAB = str(REPO / "cluster_specs" / "lab.json")
EXP = str(REPO / "examples" / "hello.py")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"SLURM_RL_CLUSTERS": str(tmp_path / "clusters.json"), "CLUSTER_SPEC_PATH": ""}


def one_line_exit_2(res) -> str:  # type: ignore[no-untyped-def]
    assert res.returncode == 2 and res.stdout == "", (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


def test_the_file_is_where_users_keep_such_things(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert clusters_path(Settings.current({})) == tmp_path / "cfg" / "slurm_rl" / "clusters.json"
    assert clusters_path(Settings.current({"SLURM_RL_CLUSTERS": "/x/c.json"})) == Path("/x/c.json")


def test_add_list_remove_and_the_bad_inputs(env: dict[str, str], tmp_path: Path) -> None:
    added = run_cli("clusters", "add", "a", LAB, env=env)
    assert added.returncode == 0 and f"cluster a: spec {LAB}" in added.stdout, added.stderr
    assert load_clusters(Path(env["SLURM_RL_CLUSTERS"]))["a"].spec == LAB
    again = one_line_exit_2(run_cli("clusters", "add", "a", LAB, env=env))
    assert "a cluster of that name is there" in again and "clusters remove a" in again
    assert "'auto' is reserved" in one_line_exit_2(run_cli("clusters", "add", "auto", LAB, env=env))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"cluster_name": "b", "fileroot": "/x", "qos": "a b"}))
    assert "qos" in one_line_exit_2(run_cli("clusters", "add", "b", str(bad), env=env))  # its spec must load
    assert "b" not in load_clusters(Path(env["SLURM_RL_CLUSTERS"]))
    missing = one_line_exit_2(run_cli("clusters", "remove", "nosuch", env=env))
    assert "no cluster of that name; the clusters are a" in missing
    assert run_cli("clusters", "remove", "a", env=env).returncode == 0
    assert load_clusters(Path(env["SLURM_RL_CLUSTERS"])) == {}


def test_cluster_names_the_spec_of_submit_and_every_job_command(env: dict[str, str], tmp_path: Path) -> None:
    assert run_cli("clusters", "add", "a", LAB, env=env).returncode == 0
    by_spec = run_cli("render", LAB, EXP, "-N", "2", env=env)
    by_name = run_cli("render", "--cluster", "a", EXP, "-N", "2", env=env)
    assert by_spec.returncode == 0 and by_name.stdout == by_spec.stdout, by_name.stderr
    nosuch = one_line_exit_2(run_cli("submit", "--cluster", "nosuch", EXP, "--dry-run", env=env))
    assert nosuch.startswith("slurm-rl: error: --cluster nosuch: no cluster of that name; the clusters are a")
    both = one_line_exit_2(run_cli("submit", "--cluster", "a", LAB, EXP, "--dry-run", env=env))
    assert "--cluster a and the spec" in both and "give one" in both
    assert "give one" in one_line_exit_2(run_cli("status", "1", "--cluster", "a", "--spec", LAB, env=env))
    gone = tmp_path / "gone.json"
    gone.write_text(Path(LAB).read_text())
    assert run_cli("clusters", "add", "g", str(gone), env=env).returncode == 0
    gone.unlink()
    said = one_line_exit_2(run_cli("logs", "1", "--cluster", "g", env=env))
    assert said.startswith("slurm-rl: error: cluster g: spec ") and "clusters remove g" in said, said


def test_every_command_with_a_spec_takes_cluster_from_the_one_mechanism() -> None:
    def walk(group: click.Group, path: str = ""):  # type: ignore[no-untyped-def]
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                yield from walk(command, f"{path}{name} ")
            else:
                yield f"{path}{name}", command

    with_spec = {n: c for n, c in walk(cli) if any(p.name == "spec_flag" for p in c.params) and n != "run"}
    assert {"submit", "render", "status", "logs", "teardown", "attach", "stacks", "fetch", "list"} <= set(with_spec)
    for name, command in with_spec.items():
        assert isinstance(command, RemoteCommand), name
        assert [p for p in command.params if p.name == "cluster"], f"{name} has no --cluster"
    assert not [p for p in cli.commands["run"].params if p.name == "cluster"]  # a local run: on no cluster


def test_a_clusters_own_slurm_config_goes_with_every_command_it_runs() -> None:
    calls: list[list[str]] = []

    def runner(argv, timeout_s):  # type: ignore[no-untyped-def]
        calls.append(list(argv))
        return Completed(0, "48000|PENDING||Priority|N/A|lab|10\n", "")

    client = SlurmClient(runner, slurm_conf="/etc/slurm-b/slurm.conf")
    assert client.job_state(48000).reason == "Priority"
    assert calls[0][:3] == ["env", "SLURM_CONF=/etc/slurm-b/slurm.conf", "squeue"]
    assert SlurmClient(runner).job_state(48000).partition == "lab" and calls[1][0] == "squeue"


def test_a_cluster_whose_slurm_config_is_not_here_answers_at_once(tmp_path: Path) -> None:
    from slurm_rl.core.errors import SlurmCommandError

    gone = tmp_path / "etc-slurm-b" / "slurm.conf"  # an unmounted site, a lab brought down
    with pytest.raises(SlurmCommandError, match=f"its SLURM config {gone} is not on this machine"):
        SlurmClient(slurm_conf=str(gone)).my_queue(check=True)


def test_list_asks_every_cluster_at_once_and_a_silent_one_is_one_line(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slurm_rl.core.paths import JobPaths
    from slurm_rl.login.reading import cluster_states

    monkeypatch.setenv("SLURM_RL_CLUSTERS", env["SLURM_RL_CLUSTERS"])
    specs = {}
    for name, cluster, conf in (("a", "lab", "/etc/slurm/slurm.conf"), ("b", "labb", "/etc/slurm-b/slurm.conf")):
        specs[name] = tmp_path / f"{name}.json"
        specs[name].write_text(json.dumps({"cluster_name": cluster, "fileroot": "/x", "slurm_conf": conf}))
        assert run_cli("clusters", "add", name, str(specs[name]), env=env).returncode == 0
    dirs = []
    for job, cluster in (("48001", "lab"), ("48002", "labb")):
        d = tmp_path / "root" / "me" / "exp" / job
        d.mkdir(parents=True)
        (d / "spec.json").write_text(json.dumps({"cluster_name": cluster}))
        dirs.append(JobPaths(d))

    def runner(argv, timeout_s):  # type: ignore[no-untyped-def]
        if "SLURM_CONF=/etc/slurm-b/slurm.conf" in argv:
            return Completed(1, "", "squeue: error: Unable to contact slurm controller (connect failure)")
        if "squeue" in argv:
            return Completed(0, "48001|RUNNING|node1|None|2026-12-05T10:00:00|lab|10\n", "")
        return Completed(0, "", "")

    def client_for(spec):  # type: ignore[no-untyped-def]
        return SlurmClient(runner, slurm_conf=spec.slurm_conf)

    states, cluster_of, silent = cluster_states.states_by_cluster(dirs, SlurmClient(runner), client_for)
    assert cluster_of == {"48001": "a", "48002": "b"}
    assert states["48001"].state == "RUNNING" and states["48002"].state == "UNKNOWN"
    assert (
        len(silent) == 1 and silent[0].startswith("cluster b: does not answer (") and "Unable to contact" in silent[0]
    )


def test_a_job_id_names_its_cluster_and_a_bare_id_two_clusters_share_is_refused(
    env: dict[str, str], tmp_path: Path
) -> None:
    index = tmp_path / "jobs.jsonl"
    env = {**env, "SLURM_RL_INDEX": str(index)}
    lines = []
    for name, cluster in (("a", "lab"), ("b", "labb")):
        spec = tmp_path / f"{name}.json"
        spec.write_text(json.dumps({"cluster_name": cluster, "fileroot": str(tmp_path / name)}))
        assert run_cli("clusters", "add", name, str(spec), env=env).returncode == 0
        for job in ("48001", f"4900{len(lines)}"):
            d = tmp_path / name / "me" / "exp" / job
            (d / "logs").mkdir(parents=True)
            (d / "manifest.json").write_text("{}")
            (d / "logs" / "driver.log").write_text(f"the driver of {job} on {name}\n")
            lines.append(json.dumps({"job_id": job, "job_dir": str(d), "cluster": cluster, "submitted": len(lines)}))
    index.write_text("\n".join(lines) + "\n")
    shared = one_line_exit_2(run_cli("logs", "48001", env=env))
    assert "clusters a, b each have a job 48001; say which: `a:48001` or `b:48001`" in shared, shared
    for name in ("a", "b"):
        said = run_cli("logs", f"{name}:48001", env=env)
        assert said.returncode == 0 and said.stdout == f"the driver of 48001 on {name}\n", said.stderr
        assert run_cli("logs", "48001", "--cluster", name, env=env).stdout == said.stdout  # --cluster says it too
    alone = run_cli("logs", "49002", env=env)  # only b has it: found there
    assert alone.returncode == 0 and alone.stdout == "the driver of 49002 on b\n", alone.stderr
    assert "no cluster 'c'; the clusters are a, b" in one_line_exit_2(run_cli("logs", "c:48001", env=env))


def test_auto_is_submits_alone_and_needs_clusters(env: dict[str, str]) -> None:
    assert "submit and sweep choose a cluster" in one_line_exit_2(run_cli("status", "1", "--cluster", "auto", env=env))
    assert "only submit races a cluster" in one_line_exit_2(run_cli("sweep", "--cluster", "first", EXP, env=env))
    swept = one_line_exit_2(run_cli("sweep", "--cluster", "auto", EXP, "--dry-run", env=env))
    assert "--cluster auto: no clusters to choose from" in swept, swept
    first = one_line_exit_2(run_cli("submit", "--cluster", "first", EXP, "--dry-run", env=env))
    assert "--cluster first: no clusters to choose from; there are none in" in first, first
    none = one_line_exit_2(run_cli("submit", "--cluster", "auto", EXP, "--dry-run", env=env))
    assert "--cluster auto: no clusters to choose from; there are none in" in none, none
