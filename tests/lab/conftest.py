"""Fixtures of the lab tests that need more than the plain lab."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.conftest import CLI_USER, LAB, hand_to, lab_nodes
from tests.lab.helpers import lab_up, lab_up_args, pyxis_missing
from tests.lab.sharing import is_shared, lab_lock, note_running
from tests.lab.users import USER


@pytest.fixture(autouse=True)
def lab_user(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """`slurm-rl` as an ordinary user (tests/lab/users.py's USER) in a lab test marked
    ``as_lab_user``, or in every lab test when SLURM_RL_TEST_USER names one: run_cli runs as it,
    and the test's tmp_path is its own (the dirs above it may be traversed)."""
    marked = request.node.get_closest_marker("as_lab_user") is not None
    name = os.environ.get("SLURM_RL_TEST_USER") or (USER if marked else None)
    if not name or request.node.get_closest_marker("lab") is None:
        yield None
        return
    if "tmp_path" in request.fixturenames:
        hand_to(request.getfixturevalue("tmp_path"), name)
    CLI_USER["name"] = name
    try:
        yield name
    finally:
        CLI_USER["name"] = None


@pytest.fixture(scope="session")
def pyxis_lab(lab: list[str]) -> list[str]:
    """The lab with Pyxis + enroot and a current image (it carries slurm-rl itself: rebuilt, in
    seconds, when the code changed since `up`); skips, saying why, on a lab without Pyxis."""
    why = pyxis_missing()
    if why:
        pytest.skip(why)
    res = subprocess.run([str(LAB), "image"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return lab


_suite_lab: list[str] | None = None  # `up` options of the lab before a test switched it to 4 nodes


@pytest.fixture
def lab4(lab: list[str]) -> list[str]:
    """The lab with 4 nodes (a spare node for healing; on 23.11+, blocks of two for --segment).
    Brought up once and kept while the next tests need it: a test that asks for it is marked
    ``four_nodes``, and tests/conftest.py runs those one after another (first in the lab stream;
    last, before ``lab_last``, in a run without lab-tail), so the lab switches once. The first other
    lab test after them but ``lab_last`` (which restarts the lab as it finds it) brings the lab
    back as the suite had it, and so does the session's end unless SLURM_LAB_KEEP_4 is set (the
    caller replaces the lab next)."""
    global _suite_lab
    if len(lab) >= 4:
        return lab
    before = lab_up_args()
    i = before.index("--nodes") if "--nodes" in before else len(before)
    lab_up(*before[:i], *before[i + 2 :], "--nodes", "4")
    _suite_lab = _suite_lab or before
    return lab_nodes()


@pytest.fixture(autouse=True)
def _lab_as_the_suite_had_it(request: pytest.FixtureRequest) -> None:
    """Back to the suite's lab before a test that needs neither 4 nodes nor to be ``lab_last``
    (that one restarts the lab as it finds it; the session's end switches back after it)."""
    global _suite_lab
    lab_last = request.node.get_closest_marker("lab_last") is not None
    if _suite_lab is not None and "lab4" not in request.fixturenames and not lab_last:
        lab_up(*_suite_lab)
        _suite_lab = None


def _alone(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker("lab") is not None and not is_shared(item)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outside pytest-timeout's: waiting is not the test's time
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A lab test runs under the lab lock (tests/lab/sharing.py): shared when it is marked
    lab_shared, else exclusive, kept to the next test while that one must be alone too or while
    the lab waits to go back from 4 nodes (the next test's setup brings it back)."""
    if item.get_closest_marker("lab") is None:
        yield
        return
    lock = lab_lock()
    lock.take(exclusive=_alone(item) or _suite_lab is not None, test=item.nodeid)
    note_running(item)
    try:
        yield
    finally:
        note_running(None)
        if not (_alone(nextitem) or _suite_lab is not None):
            lock.release()


def pytest_sessionfinish(session: pytest.Session) -> None:
    # the last lab test needed 4 nodes: the lab goes back as it was (unless the caller replaces
    # the lab next anyway: tests/lab/slurm-versions)
    if _suite_lab is not None and not os.environ.get("SLURM_LAB_KEEP_4"):
        lab_lock().take(exclusive=True, test="the session's end (the lab back to 3 nodes)")
        lab_up(*_suite_lab)
