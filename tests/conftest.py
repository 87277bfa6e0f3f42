"""Shared fixtures: the lab (a real SLURM, see tests/lab/slurm-lab), golden files, CLI runner."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab.become import user_argv
from tests.lab.sharing import in_tail, refuse_oversubscribe
from tests.lab.sharing import stream as lab_stream

pytest_plugins = ["tests.skip_policy"]  # under CI=true a skip not on tests/ci_skips.toml fails the run

REPO = Path(__file__).resolve().parent.parent
LAB = REPO / "tests" / "lab" / "slurm-lab"


@pytest.hookimpl(wrapper=True)  # marks before `-m` and pytest-xdist read them; the order after `-m`
def pytest_collection_modifyitems(items: list[pytest.Item]) -> Iterator[None]:
    """Layers: every test under tests/lab is ``lab``; a unit test that starts a local Ray is
    marked ``ray`` in its module; the rest are ``unit`` (`pytest -m unit`: seconds, no Ray, no
    SLURM). The order (``lab_order``; the sort is stable, so the rest keep their order), by
    their marks whatever their file names: the lab tests that need ``four_nodes`` first (the lab
    switches to 4 nodes once and is not switched back between them), then those marked
    ``lab_last`` (they restart the lab as it then is), then the rest that must be alone, the
    shared ones, and ``lab-tail`` last. A run without ``lab-tail`` (``pytest -m smoke_versions``) runs
    the 4-node tests and then ``lab_last`` at its end instead (``lab_order_alone``): the lab
    then never switches back.

    Two streams under ``-n 2 --dist loadgroup`` (the README's command): the lab tests, one after
    another (they share the lab's nodes and some restart it; ``SLURM_RL_LAB_STREAMS=2`` with
    ``-n 3`` makes two lab streams, tests/lab/sharing.py), beside everything else, one after
    another (a local Ray is found by ``address="auto"``: two at once on one host would meet).
    The lab tests mostly wait on SLURM's clocks, so the machine has room for the second stream;
    the tail (``lab-tail``, one xdist group per module: tests/lab/sharing.py) is queued after both
    streams, and each worker takes its modules one at a time as it nears its own stream's end."""
    for item in items:
        if "tests/lab/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.lab)
            item.add_marker(pytest.mark.xdist_group(lab_stream(item)))
        else:
            if item.get_closest_marker("ray") is None:
                item.add_marker(pytest.mark.unit)
            item.add_marker(pytest.mark.xdist_group("local"))
    yield  # `-m` deselects
    items.sort(key=lab_order if any(map(_in_tail, items)) else lab_order_alone)


def lab_order(item: pytest.Item) -> tuple[bool, ...]:
    """Sort key (False sorts first) of a run with a tail (lab-tail): the lab tests that need 4 nodes,
    then lab_last, then the others that must be alone (and the local tests), then the shared ones,
    then the tail. So nothing that must be alone is left in the lab stream when the tail starts
    (near the end of the local stream): it runs beside the lab stream's shared tests to the end.
    The lab switches to 4 nodes and back (one `up` more: 15 s busy) before any test but the 4-node
    ones has made a node's image cache, which an `up` empties. (pytest-xdist queues the tail's
    groups, the smallest, after both streams whatever the order.)"""
    return (_in_tail(item), _marked(item, "lab_shared"), *(not _marked(item, n) for n in ("four_nodes", "lab_last")))


def lab_order_alone(item: pytest.Item) -> tuple[bool, ...]:
    """Sort key of a run with one lab stream: alone, shared, 4 nodes, lab_last (no switch back)."""
    return tuple(_marked(item, name) for name in ("lab_last", "four_nodes", "lab_shared"))


def _in_tail(item: pytest.Item) -> bool:
    return any(in_tail(str(m.args[0])) for m in item.iter_markers("xdist_group") if m.args)


def _marked(item: pytest.Item, name: str) -> bool:
    return item.get_closest_marker(name) is not None


# Both streams run at the same priority: both workers take the tail's modules as their streams
# end, and end together, so neither stream is the one to favour. A niced local stream (until ci92)
# made its worker's span depend on what the lab ran beside it: 783 s in ci90, 1470 s in ci91
# (docs/measurements.md).


TIMES_ENV = "SLURM_RL_TEST_TIMES"  # .ci/run: a file each test's phases are appended to (its summary)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With SLURM_RL_TEST_TIMES set, one line per test phase: seconds, phase, node id, the
    worker, when the phase ended (Unix time: each stream's timeline, its waits for the lab lock
    included) and the pytest run (its pid). Written by the process that reports, the controller
    under pytest-xdist: workers' reports reach it."""
    path = os.environ.get(TIMES_ENV)
    if path and not os.environ.get("PYTEST_XDIST_WORKER"):
        worker = getattr(report, "node", None)
        worker_id = getattr(worker, "gateway", None) and worker.gateway.id  # type: ignore[union-attr]
        fields = (f"{report.duration:.2f}", report.when, report.nodeid.replace(" ", "_"), worker_id or "-")
        with open(path, "a") as f:
            f.write(" ".join((*fields, f"{time.time():.1f}", str(os.getpid()))) + "\n")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="rewrite tests/golden/* from the current render instead of comparing",
    )


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


# Whom `run_cli` runs `slurm-rl` as: None (this process's user), or an ordinary user of the lab
# (tests/lab/users.py), set for a lab test by the ``lab_user`` fixture (tests/lab/conftest.py).
CLI_USER: dict[str, str | None] = {"name": None}


def hand_to(path: Path, user: str) -> None:
    """PATH and all below it made ``user``'s, and the dirs above it (up to /tmp or /) traversable
    by others: a test's files handed to the user its commands run as."""
    for parent in path.parents:
        if parent in (Path("/tmp"), Path("/")):
            break
        parent.chmod(parent.stat().st_mode | 0o001)
    subprocess.run(["chown", "-R", f"{user}:", str(path)], check=True, timeout=60)


def hand_to_cli_user(path: Path) -> Path:
    """PATH handed to ``CLI_USER`` (hand_to) when a lab test set one, as it is otherwise: files a
    test makes for what its `slurm-rl` commands read or write as that user."""
    if CLI_USER["name"]:
        hand_to(path, CLI_USER["name"])
    return path


def python_argv(*args: str, python: str = sys.executable, env: dict[str, str] | None = None) -> list[str]:
    """argv of ``python ARGS``, as ``CLI_USER`` when a lab test set one: how a test runs what a
    user runs (`slurm-rl`, a script calling the Python API) another way than run_cli."""
    argv = [python, *args]
    user = CLI_USER["name"]
    return user_argv(user, argv, env) if user else argv


def cli_argv(*args: str, env: dict[str, str] | None = None) -> list[str]:
    """argv of `slurm-rl ARGS`, as ``CLI_USER`` when a lab test set one (for a test that runs it
    another way than run_cli: under a shell's ulimit, or followed with Popen)."""
    return python_argv("-m", "slurm_rl", *args, env=env)


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: str | Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the real `slurm-rl` entry point in a subprocess (exit codes and stderr as users see),
    as ``CLI_USER`` when a lab test set one."""
    refuse_oversubscribe(args)
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        cli_argv(*args, env=env),
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


LAB_STATE = Path(os.environ.get("SLURM_LAB_STATE", "/var/lib/slurm-lab"))
SINFO_BOUND_S = 10  # one sinfo call; a slower one is asked again (the lab fixture's wait), never read as "no lab"


def lab_nodes(states: tuple[str, ...] | None = ("idle", "mix", "alloc")) -> list[str]:
    """Nodes of the lab partition in one of STATES (None: in any state), or [] when no lab is up.
    Raises TimeoutError when sinfo does not answer within SINFO_BOUND_S (a busy slurmctld)."""
    if shutil.which("sinfo") is None:
        return []
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-N", "-p", "lab", "-o", "%N %t"], capture_output=True, text=True, timeout=SINFO_BOUND_S
        ).stdout
    except subprocess.TimeoutExpired as e:
        raise TimeoutError(f"sinfo did not answer in {SINFO_BOUND_S} s") from e
    return sorted(
        {
            line.split()[0]
            for line in out.splitlines()
            if len(line.split()) == 2 and (states is None or line.split()[1] in states)
        }
    )


def lab_is_up() -> bool:
    """Whether `tests/lab/slurm-lab up` has brought a lab up here (its own record, not sinfo's
    answer at one moment: a slow controller is a lab to wait for, not a missing one)."""
    return (LAB_STATE / "run" / "up-args").is_file()


def lab_exec(node: str, *cmd: str, timeout: float = 30) -> str:
    return subprocess.run(
        [str(LAB), "exec", node, "--", *cmd], capture_output=True, text=True, timeout=timeout, check=True
    ).stdout


LAB_BUSY_WAIT_S = 300  # the other stream may hold a node down, completing or restarting for a while


@pytest.fixture(scope="session")
def lab() -> list[str]:
    """The lab's nodes, once at least three are usable; a skip only where no lab was brought up
    (under CI=true that skip fails the run: tests/skip_policy.py). Session-scoped per stream, so
    it never gives up on one slow answer (ci85 skipped a whole stream when the other stream's
    test had a node out of service at that moment): it waits, bounded, and fails naming what it
    waited for."""
    if not lab_is_up():
        pytest.skip(f"the SLURM lab is not up ({LAB_STATE}/run/up-args): run `sudo tests/lab/slurm-lab up --nodes 3`")
    deadline = time.monotonic() + LAB_BUSY_WAIT_S
    last = "no answer yet"
    while True:
        try:
            nodes = lab_nodes()
            if len(nodes) < 3:  # what to say if it stays so
                last = f"{len(nodes)} usable of {lab_nodes(states=None)} (sinfo -p lab)"
        except TimeoutError as e:
            nodes, last = [], str(e)
        if len(nodes) >= 3 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert len(nodes) >= 3, f"the lab is up but waited {LAB_BUSY_WAIT_S} s for 3 usable nodes: last, {last}"
    return nodes
