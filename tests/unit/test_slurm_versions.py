"""Which SLURM a site runs: read once per command from ``sinfo --version`` (answers recorded on
the lab's 22.05, 24.11 and 26.05), refused in one line when older than supported, and what each
version offers (``--segment``) chosen by it."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_rl.config.spec import parse_spec
from slurm_rl.core.errors import UsageError
from slurm_rl.login.submission.plan import plan_job
from slurm_rl.login.submission.render import render_sbatch
from slurm_rl.login.submission.resolve import resolve_options
from slurm_rl.login.submission.submit import submit
from slurm_rl.slurm import Completed, SlurmClient, SlurmVersion, supported_text
from tests.conftest import REPO
from tests.unit.test_site_options import SPEC, FakeSite


@pytest.mark.parametrize(
    ("answer", "version", "segments"),
    [
        ("slurm-wlm 22.05.8\n", SlurmVersion(22, 5, 8), False),
        ("slurm 24.11.5\n", SlurmVersion(24, 11, 5), True),
        ("slurm 26.05.5\n", SlurmVersion(26, 5, 5), True),
        ("slurm 23.11.0-0rc1\n", SlurmVersion(23, 11, 0), True),
    ],
)
def test_the_version_is_asked_once_per_client(answer: str, version: SlurmVersion, segments: bool) -> None:
    calls: list[list[str]] = []

    def runner(argv, timeout_s):  # type: ignore[no-untyped-def]
        calls.append(list(argv))
        return Completed(0, answer, "")

    client = SlurmClient(runner)
    assert client.version() == version and client.version() == version
    assert calls == [["sinfo", "--version"]]
    assert version.segments is segments and version.release == str(version).rsplit(".", 1)[0]


def test_a_slurm_older_than_supported_is_refused_in_one_line() -> None:
    client = SlurmClient(lambda argv, t: Completed(0, "slurm 21.08.8-2\n", ""))
    with pytest.raises(UsageError) as err:
        client.version()
    assert str(err.value).startswith("this site runs SLURM 21.08.8; slurm-rl needs SLURM 22.05 or newer")
    assert err.value.exit_code == 2 and "\n" not in str(err.value)
    assert "22.05, 24.11, 26.05" in supported_text()


def _opts(tmp_path: Path, **flags: object):  # type: ignore[no-untyped-def]
    exp = tmp_path / "exp.py"
    exp.write_text("print('hi')\n")
    return resolve_options(parse_spec(SPEC), str(exp), user="u", workdir=str(REPO), **flags)


def test_segment_reaches_sbatch_and_must_divide_the_nodes(tmp_path: Path) -> None:
    script = render_sbatch(plan_job(parse_spec(SPEC), _opts(tmp_path, nodes=4, segment=2)))
    assert "#SBATCH --segment=2" in script.splitlines()
    with pytest.raises(UsageError, match=r"^--segment 3: must divide the job's 4 nodes \(whole segments\)"):
        _opts(tmp_path, nodes=4, segment=3)
    with pytest.raises(UsageError, match=r"--segment=2.: slurm-rl has a flag for this; use --segment 2 instead"):
        _opts(tmp_path, nodes=4, sbatch_args=("--segment=2",))


def test_segment_on_a_slurm_without_segments_is_refused_before_the_queue(tmp_path: Path) -> None:
    spec = parse_spec({**SPEC, "fileroot": str(tmp_path)})
    old = FakeSite(slurm="slurm-wlm 22.05.8")
    with pytest.raises(UsageError, match=r"^--segment 2: SLURM 22.05.8 has no segments \(23.11 and later"):
        submit(spec, _opts(tmp_path, nodes=4, segment=2), old)  # type: ignore[arg-type]
    assert old.sbatched == 0
