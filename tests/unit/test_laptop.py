"""The laptop side without a login node: a parsed command goes back to the same argv, the
login node is chosen as documented, ssh's failures become one line, and the probe's answers
(missing slurm-rl, another version, a fileroot not writable) are named with their fix."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import click
import pytest

from slurm_rl._version import __version__
from slurm_rl.laptop import cli as laptop_cli
from slurm_rl.laptop.forward import to_argv
from slurm_rl.laptop.session import Remote, connect, laptop_spec_text
from slurm_rl.laptop.ssh import Login, LoginError
from slurm_rl.login.cli import cli
from tests.unit.conftest import Laptop

pytestmark = pytest.mark.unit


def parsed(*argv: str) -> tuple[click.Command, dict]:
    name, *rest = argv
    command = cli.commands[name]
    with command.make_context(name, list(rest)) as ctx:
        return command, dict(ctx.params)


@pytest.mark.parametrize(
    "argv",
    [
        ("submit", "spec.json", "exp.py", "-N", "3", "--snapshot", "--wait", "--json", "--", "--lr", "0.1", "-x"),
        ("submit", "spec.json", "-N", "2", "--dashboard", "--sbatch-arg=--comment=a b", "--sbatch-arg", "--x=1"),
        ("sweep", "spec.json", "exp.py", "--max-concurrent", "2", "--grid", "g.jsonl", "--", "--lr", "1,2"),
        ("attach", "12", "--", "python", "-c", "print('a b')"),
        ("teardown", "12_3", "--force", "--json", "--spec", "s.json"),
        ("logs", "12", "-f", "--node", "node2"),
        ("status",),
        ("fetch", "12", "--to", "-"),
    ],
)
def test_a_command_forwarded_parses_the_same_on_the_login_node(argv: tuple[str, ...]) -> None:
    command, params = parsed(*argv)
    params.pop("login", None)
    again = to_argv(command, params)
    _, reparsed = parsed(argv[0], *again)
    reparsed.pop("login", None)
    assert reparsed == params, again


def test_the_login_node_is_the_flag_then_the_environment_then_the_spec_where_slurm_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"cluster_name": "c", "fileroot": "/x", "login": "me@cluster"}))
    params = {"args": (str(spec), "exp.py"), "spec_flag": None}
    monkeypatch.delenv("SLURM_RL_LOGIN", raising=False)
    monkeypatch.setattr(laptop_cli, "client_installed", lambda: False)  # a laptop: no sbatch
    assert laptop_cli.login_target("submit", None, params) == "me@cluster"
    assert laptop_cli.login_target("submit", "other", params) == "other"
    assert laptop_cli.login_target("submit", "local", params) is None
    monkeypatch.setenv("SLURM_RL_LOGIN", "env-host")
    assert laptop_cli.login_target("submit", None, params) == "env-host"
    monkeypatch.delenv("SLURM_RL_LOGIN")
    monkeypatch.setattr(laptop_cli, "client_installed", lambda: True)  # on the login node
    assert laptop_cli.login_target("submit", None, params) is None


def test_the_spec_sent_to_the_login_node_drops_the_laptop_fields(tmp_path: Path) -> None:
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"cluster_name": "c", "fileroot": "~/x", "login": "h", "login_python": "/p"}))
    raw, text = laptop_spec_text(str(spec))
    assert raw["login"] == "h" and json.loads(text) == {"cluster_name": "c", "fileroot": "~/x"}


@pytest.mark.parametrize(
    ("stderr", "needle"),
    [
        ("ssh: Could not resolve hostname nope: Name or service not known", "unreachable"),
        ("ssh: connect to host 10.0.0.9 port 22: Connection refused", "unreachable"),
        ("root@login: Permission denied (publickey).", "authentication failed"),
        ("Host key verification failed.", "host key"),
        ("kex_exchange_identification: banner line contains invalid characters", "failed: kex_exchange"),
    ],
)
def test_each_ssh_failure_is_one_line_naming_the_fix(stderr: str, needle: str) -> None:
    with pytest.raises(LoginError) as err:
        Login("root@login").raise_for(stderr)
    assert needle in str(err.value) and "\n" not in str(err.value) and err.value.exit_code == 2


def test_ssh_shares_one_connection_and_reads_the_named_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SLURM_RL_SSH_CONFIG", "/etc/lab/ssh_config")
    short = Path(tempfile.mkdtemp(prefix="cm"))  # pytest's tmp_path may be too long for a socket
    monkeypatch.setenv("SLURM_RL_SSH_DIR", str(short))
    argv = Login("login").command_argv(["python3", "-m", "slurm_rl", "status", "a b"])
    assert argv[:3] == ["ssh", "-F", "/etc/lab/ssh_config"] and "ControlMaster=auto" in argv
    [control] = [a for a in argv if a.startswith("ControlPath=")]
    assert control.startswith(f"ControlPath={short}/") and "BatchMode=yes" in argv  # pytest's stdin: no tty
    monkeypatch.setenv("SLURM_RL_SSH_DIR", str(tmp_path / ("deep" * 30)))  # too long for a socket
    [control] = [a for a in Login("login").command_argv(["true"]) if a.startswith("ControlPath=")]
    assert len(control.removeprefix("ControlPath=")) + 17 <= 100 and "slurm-rl-ssh-" in control
    assert argv[-2:] == ["login", "python3 -m slurm_rl status 'a b'"]


class CannedLogin(Login):
    def __init__(self, rc: int, stdout: str = "", stderr: str = "") -> None:
        super().__init__("root@login")
        object.__setattr__(self, "answer", subprocess.CompletedProcess([], rc, stdout.encode(), stderr.encode()))

    def run(self, remote: list[str], **_: object) -> subprocess.CompletedProcess[bytes]:
        return self.answer  # type: ignore[attr-defined,no-any-return]


def probe_answer(version: str | None, writable: bool = True) -> str:
    return json.dumps(
        {"version": version, "user": "u", "fileroot": "/f", "writable": writable, "dir": "/f/u/.laptop", "spec": ""}
    )


def test_the_probe_names_a_missing_slurm_rl_another_version_and_a_locked_fileroot() -> None:
    with pytest.raises(LoginError, match=r"no interpreter /opt/py there.*pip install slurm-rl=="):
        connect(CannedLogin(127, stderr="sh: /opt/py: not found"), "/opt/py", "/f", "")
    with pytest.raises(LoginError, match=r"not installed in python3 on root@login: pip install slurm-rl=="):
        connect(CannedLogin(0, probe_answer(None)), "python3", "/f", "")
    with pytest.raises(LoginError, match=rf"slurm-rl 0\.0\.9 on root@login \(python3\), {__version__} here"):
        connect(CannedLogin(0, probe_answer("0.0.9")), "python3", "/f", "")
    remote = connect(CannedLogin(0, probe_answer(__version__, writable=False)), "python3", "/f", "")
    assert isinstance(remote, Remote) and remote.user == "u"
    with pytest.raises(LoginError, match=r"the fileroot /f on root@login is not writable by u"):
        remote.upload({"code/x.py": Path(__file__)}, snapshot=False)


def test_the_dashboard_relay_adds_the_token_and_closes_each_request() -> None:
    from slurm_rl.login.dashboard_relay import add_token

    head = b"GET /api/version HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nX-Ray-Authorization: forged"
    out = add_token(head, "s3cret")
    assert out.endswith(b"\r\n\r\n") and b"forged" not in out and b"keep-alive" not in out
    assert b"X-Ray-Authorization: Bearer s3cret\r\n" in out and b"Connection: close\r\n" in out
    ws = add_token(b"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade", "t")
    assert b"Connection: Upgrade" in ws and b"Connection: close" not in ws


def test_tensorboard_serves_a_jobs_event_files_on_localhost_and_names_a_job_without_them(tmp_path: Path) -> None:
    import urllib.request

    from slurm_rl.core.errors import UsageError
    from slurm_rl.core.paths import JobPaths
    from slurm_rl.login import tensorboard as board

    paths = JobPaths(tmp_path / "123")
    with pytest.raises(UsageError, match=r"job 123 wrote no TensorBoard events .*MetricsLog"):
        board.logdir_of("123", paths)
    (paths.job_dir / "tensorboard").mkdir(parents=True)
    proc, port = board.start(board.logdir_of("123", paths))
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/environment", timeout=30) as answer:
            assert "data_location" in json.loads(answer.read())
    finally:
        proc.kill()
        proc.wait()


def test_the_relay_without_a_token_passes_the_request_as_it_came() -> None:
    import os
    import socket
    import threading

    from slurm_rl.login.dashboard_relay import relay

    server = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def answer() -> None:
        conn, _ = server.accept()
        got.append(conn.recv(4096))
        conn.sendall(b"HTTP/1.0 200 OK\r\n\r\nhi")
        conn.close()

    threading.Thread(target=answer, daemon=True).start()
    req_r, req_w = os.pipe()
    out_r, out_w = os.pipe()
    os.write(req_w, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    os.close(req_w)
    relay("127.0.0.1", server.getsockname()[1], None, stdin=req_r, stdout=out_w)
    os.close(out_w)
    assert got == [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"] and os.read(out_r, 100).endswith(b"hi")


def test_images_goes_to_the_login_node_as_the_same_subcommand() -> None:
    sub = cli.commands["images"].commands["prune"]  # type: ignore[attr-defined]
    assert any(p.name == "login" for p in sub.params)  # from a laptop it runs there, through SLURM
    with sub.make_context("prune", ["k1", "k2", "-p", "gpu", "--json", "--spec", "s.json"]) as ctx:
        params = dict(ctx.params)
    params.pop("login")
    with sub.make_context("prune", to_argv(sub, params)) as ctx:
        again = dict(ctx.params)
    again.pop("login")
    assert again == params and again["keys"] == ("k1", "k2")


def test_a_cluster_choice_is_made_here_never_on_the_default_specs_login_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from slurm_rl.login.submission import choose

    spec = tmp_path / "s.json"  # the laptop's default spec names a login node: auto must not go there
    spec.write_text(json.dumps({"cluster_name": "c", "fileroot": str(tmp_path / "root"), "login": "me@cluster"}))
    exp = tmp_path / "exp.py"
    exp.write_text("print('hi')\n")
    clusters = tmp_path / "clusters.json"
    monkeypatch.setenv("SLURM_RL_CLUSTERS", str(clusters))
    monkeypatch.setenv("CLUSTER_SPEC_PATH", str(spec))
    monkeypatch.delenv("SLURM_RL_LOGIN", raising=False)
    for module in (laptop_cli, choose):
        monkeypatch.setattr(module, "client_installed", lambda: False)  # a laptop: no sbatch
    forwarded: list[str] = []

    class Forwarder(laptop_cli.LoginForwarder):
        def forward(self, name, command, params, target):  # type: ignore[no-untyped-def]
            forwarded.append(f"{name} {params.get('cluster')} -> {target}")
            return 0

    runner = CliRunner()
    assert runner.invoke(cli, ["clusters", "add", "a", str(spec), "--login", "me@nowhere.invalid"]).exit_code == 0
    res = runner.invoke(cli, ["submit", "--cluster", "auto", str(exp), "--dry-run"], obj=Forwarder())
    assert res.exit_code == 2 and not forwarded, (res.output, forwarded)  # asked there, never sent to the default
    assert "no cluster can run this job: cluster a: cannot run it: login node me@nowhere.invalid is unreachable" in (
        res.output
    )
    first = runner.invoke(cli, ["submit", "--cluster", "first", str(exp), "--dry-run"], obj=Forwarder())
    assert first.exit_code == 2 and not forwarded, (first.output, forwarded)  # first asks there too
    assert "cluster a: cannot run it: login node me@nowhere.invalid is unreachable" in first.output
    # --login HOST: that login node chooses, among its own clusters (the choice goes with the command)
    res = runner.invoke(cli, ["submit", "--cluster", "first", str(exp), "--login", "other"], obj=Forwarder())
    assert res.exit_code == 0 and forwarded == ["submit first -> other"], (res.output, forwarded)


def test_a_named_cluster_goes_to_its_login_node_with_the_name_the_laptop_knows_it_by(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`submit --cluster a` from a laptop: the command goes to a's login node, which may have
    no clusters file, so a's name goes along (hidden --as-cluster), and what submit prints
    there names it, as it would here (CLUSTER:JOBID, --json's cluster)."""
    from click.testing import CliRunner

    spec = tmp_path / "a.json"
    spec.write_text(json.dumps({"cluster_name": "c", "fileroot": str(tmp_path / "root")}))
    exp = tmp_path / "exp.py"
    exp.write_text("print('hi')\n")
    monkeypatch.setenv("SLURM_RL_CLUSTERS", str(tmp_path / "clusters.json"))
    monkeypatch.delenv("SLURM_RL_LOGIN", raising=False)
    monkeypatch.setattr(laptop_cli, "client_installed", lambda: False)
    sent: list[tuple[str, list[str]]] = []

    class Forwarder(laptop_cli.LoginForwarder):
        def forward(self, name, command, params, target):  # type: ignore[no-untyped-def]
            sent.append((target, to_argv(command, params)))
            return 0

    runner = CliRunner()
    assert runner.invoke(cli, ["clusters", "add", "a", str(spec), "--login", "me@a-login"]).exit_code == 0
    res = runner.invoke(cli, ["submit", "--cluster", "a", str(exp), "--json"], obj=Forwarder())
    assert res.exit_code == 0, res.output
    [(target, argv)] = sent
    assert target == "me@a-login" and argv[argv.index("--as-cluster") + 1] == "a", argv
    assert "--cluster" not in argv and "--as-cluster" not in runner.invoke(cli, ["submit", "--help"]).output


def test_auto_asks_a_cluster_through_its_login_node_and_the_submit_goes_to_the_chosen_one(
    tmp_path: Path, laptop: Laptop
) -> None:
    import time

    from click.testing import CliRunner

    exp = laptop.exp
    now = time.time()
    answers = {"me@a": (0, json.dumps({"start": now + 3 * 3600, "waiting": 4}), ""),
               "me@b": (0, json.dumps({"start": now, "waiting": None}), ""),
               "me@c": (2, "", "slurm-rl: error: --partition gpu: no such partition on cluster c\n")}  # fmt: skip
    asked: list[list[str]] = []
    forwarded: list[tuple[str, str, str]] = []

    class Forwarder(laptop_cli.LoginForwarder):
        def capture(self, name, command, params, target):  # type: ignore[no-untyped-def]
            asked.append(to_argv(command, params))
            return answers[target]

        def forward(self, name, command, params, target):  # type: ignore[no-untyped-def]
            forwarded.append((name, params["spec_flag"], target))
            return 0

    runner = CliRunner()
    laptop.add_clusters("abc")
    res = runner.invoke(cli, ["submit", "--cluster", "auto", str(exp), "-N", "2", "--wait"], obj=Forwarder())
    assert res.exit_code == 0, res.output
    assert forwarded == [("submit", str(tmp_path / "b.json"), "me@b")]  # the submit, as typed, to b's login
    assert all("--estimate" in argv and "--wait" not in argv and "2" in argv for argv in asked), asked
    said = next(line for line in res.output.splitlines() if "--cluster auto:" in line)
    assert said.startswith("slurm-rl: --cluster auto: b (cluster b: starts now; cluster a: starts in ~2 h 59 min"), said
    assert "4 jobs waiting there; cluster c: cannot run it: --partition gpu: no such partition on cluster c)" in said
