"""Under CI=true a skip is a failure unless tests/ci_skips.toml lists it (its test and reason).

Loaded by tests/conftest.py, so every pytest call of CI (the README's, tests/lab/slurm-versions')
is held to it. Each skip not on the list is printed with its reason and turns the run's exit
code to 1; the list's hits are printed as ``ci-skips: allowed ...`` lines (.ci/run shows them).
Outside CI a skip is what it says (a laptop without the lab, say) and only printed."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomllib

LIST = Path(__file__).resolve().parent / "ci_skips.toml"
LIST_ENV = "SLURM_RL_CI_SKIPS"  # another list's path: only the policy's own test sets it


@dataclass(frozen=True)
class Allowed:
    test: str
    reason: str
    why: str

    def covers(self, nodeid: str, reason: str) -> bool:
        return fnmatch.fnmatchcase(nodeid, self.test) and self.reason in reason


def load(path: Path = LIST) -> list[Allowed]:
    """The list; a malformed entry is an error naming it (a list that cannot be read allows nothing)."""
    entries = tomllib.loads(path.read_text()).get("skip", [])
    out = []
    for i, entry in enumerate(entries):
        missing = [k for k in ("test", "reason", "why") if not str(entry.get(k, "")).strip()]
        if missing:
            raise pytest.UsageError(f"{path.name}: skip #{i + 1} lacks {', '.join(missing)}")
        out.append(Allowed(entry["test"], entry["reason"], entry["why"]))
    return out


def skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


class SkipPolicy:
    """Sorts each skip the run reports (in the controller under pytest-xdist) by the list."""

    def __init__(self, allowed: list[Allowed], enforced: bool) -> None:
        self.allowed, self.enforced = allowed, enforced
        self.hits: list[tuple[str, str, Allowed]] = []
        self.refused: list[tuple[str, str]] = []

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        reason = skip_reason(report)
        rule = next((a for a in self.allowed if a.covers(report.nodeid, reason)), None)
        if rule is None:
            self.refused.append((report.nodeid, reason))
        else:
            self.hits.append((report.nodeid, reason, rule))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.enforced and self.refused and session.exitstatus in (pytest.ExitCode.OK, 0):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:  # type: ignore[no-untyped-def]
        write = terminalreporter.write_line
        for nodeid, reason, rule in self.hits:
            write(f"ci-skips: allowed {nodeid}: {reason} (tests/ci_skips.toml: {rule.why})")
        if self.refused:
            what = "fails this run (CI=true)" if self.enforced else "would fail under CI=true"
            terminalreporter.section(f"skips not on tests/ci_skips.toml: {what}", red=self.enforced, bold=True)
            for nodeid, reason in self.refused:
                write(f"ci-skips: REFUSED {nodeid}: {reason}")


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: its reports reach the controller
        return
    enforced = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
    path = Path(os.environ.get(LIST_ENV) or LIST)
    config.pluginmanager.register(SkipPolicy(load(path), enforced), "slurm_rl_skip_policy")
