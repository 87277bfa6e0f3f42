"""A job command on a laptop with several clusters (issue 80 item 2): the job's own cluster's
login node runs it. A bare id is looked for on every login node at once and goes to the one
cluster that has it; ``CLUSTER:JOBID`` names it; an id two clusters have is refused in one line."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from slurm_rl.laptop import cli as laptop_cli
from slurm_rl.laptop.forward import to_argv
from slurm_rl.login.cli import cli
from tests.unit.conftest import Laptop

pytestmark = pytest.mark.unit


def rows(cluster_name: str, *jobs: str) -> str:
    return "\n".join(
        json.dumps({"cluster": "", "job": j, "name": "exp", "state": "COMPLETED", "submitted": "12-07 01:00",
                    "progress": "", "job dir": f"/home/me/{j}", "cluster_name": cluster_name, "t": "1.0"})
        for j in jobs
    )  # fmt: skip


class Forwarder(laptop_cli.LoginForwarder):
    """The login nodes as they answer `list --json --this-cluster`; what each forward would run."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers, self.asked, self.forwarded = answers, [], []  # type: ignore[var-annotated]

    def capture(self, name, command, params, target):  # type: ignore[no-untyped-def]
        self.asked.append((target, name))
        return 0, self.answers[target], ""

    def forward(self, name, command, params, target):  # type: ignore[no-untyped-def]
        self.forwarded.append((target, name, to_argv(command, params)))
        return 0


def test_a_bare_id_goes_to_the_login_node_of_the_cluster_that_has_it(laptop: Laptop) -> None:
    laptop.add_clusters("abc")
    # a's login node sees b's job dir too (one fileroot): only b's own rows count as b's
    a_sees = rows("a", "48001") + "\n" + rows("b", "55000007")
    fwd = Forwarder({"me@a": a_sees, "me@b": rows("b", "55000007"), "me@c": rows("c")})
    res = CliRunner().invoke(cli, ["status", "55000007"], obj=fwd)
    assert res.exit_code == 0, res.output
    assert sorted(fwd.asked) == [("me@a", "list"), ("me@b", "list"), ("me@c", "list")]
    [(target, name, argv)] = fwd.forwarded
    assert (target, name) == ("me@b", "status") and argv[-1] == "55000007", fwd.forwarded
    assert str(laptop.root / "b.json") in argv, argv  # with b's spec


def test_cluster_colon_id_names_the_cluster_and_an_id_two_clusters_have_is_refused(laptop: Laptop) -> None:
    laptop.add_clusters("ab")
    fwd = Forwarder({})
    res = CliRunner().invoke(cli, ["logs", "a:48001"], obj=fwd)
    assert res.exit_code == 0, res.output
    assert fwd.asked == [] and [(t, n, a[-1]) for t, n, a in fwd.forwarded] == [("me@a", "logs", "48001")]
    both = Forwarder({"me@a": rows("a", "777"), "me@b": rows("b", "777")})
    res = CliRunner().invoke(cli, ["status", "777"], obj=both)
    assert res.exit_code == 2 and both.forwarded == [], res.output
    assert (
        res.stderr.strip()
        .splitlines()[-1]
        .endswith("job 777: clusters a, b each have a job 777; say which: `a:777` or `b:777`")
    ), res.stderr
    nosuch = CliRunner().invoke(cli, ["status", "zz:777"], obj=Forwarder({}))
    assert nosuch.exit_code == 2 and "no cluster 'zz'" in nosuch.stderr, nosuch.output
