"""`submit --cluster first`: the job submitted to every named cluster that can run it (each asked
as --cluster auto asks: login/submission/choose.py), each behind a start gate in its batch script
(templates/sbatch.sh.j2). The first job SLURM starts is given the go; every other is cancelled,
still pending or waiting at its gate, so none of them starts anything, and its job dir goes. Never
two drivers, and the id the user sees is the kept job's. The submitter waits for the first start
(progress on stderr); Ctrl-C there cancels them all."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from ...core.errors import JobError, SlurmRlError, UsageError
from ...core.paths import JobPaths
from ...slurm import JobState, SlurmClient
from .choose import Offer
from .submit import Submitted, submit

GATE_S = 600  # a started job waits this long for the go (the submitter looks every POLL_S)
POLL_S = 1.0
GONE_S = 60.0  # a cancelled job's time to leave its queue before its dir goes anyway
STARTED = {"RUNNING", "CONFIGURING"}  # SLURM gave it its nodes: its batch script is at the gate


class Racer(Protocol):
    """One job of the race: on a cluster whose SLURM answers here (Placed), or one reached
    through its login node (login/commands/race_remote.py)."""

    @property
    def label(self) -> str: ...  # CLUSTER:JOBID

    def state(self) -> JobState | None: ...  # None: no answer this time

    def go(self) -> None: ...  # its batch script passes its gate

    def drop(self, say: Callable[[str], None]) -> None: ...  # cancelled, and nothing of it left


@dataclass(frozen=True)
class Placed:
    offer: Offer
    res: Submitted

    @property
    def label(self) -> str:
        return f"{self.offer.name}:{self.res.job_id}"

    def state(self) -> JobState | None:
        assert self.offer.client is not None
        try:
            return self.offer.client.job_state(self.res.job_id)
        except SlurmRlError:
            return None  # no answer this time: asked again at the next look

    def go(self) -> None:
        self.res.paths.start_go.touch()

    def drop(self, say: Callable[[str], None]) -> None:
        assert self.offer.client is not None
        drop_job(self.offer.client, self.res.job_id, self.res.paths, self.label, say)


def drop_job(client: SlurmClient, job_id: int | str, paths: JobPaths, label: str, say: Callable[[str], None]) -> None:
    """Cancel it, and once SLURM has let it go (bounded), remove its job dir: nothing of it stays."""
    try:
        client.scancel(job_id)
    except SlurmRlError as exc:
        say(f"--cluster first: {label}: cancel failed ({exc}); `slurm-rl teardown {label}`")
        return
    deadline = time.monotonic() + GONE_S
    while time.monotonic() < deadline:
        try:
            if not client.job_state(job_id).in_queue:
                break
        except SlurmRlError:
            pass
        time.sleep(POLL_S / 2)
    shutil.rmtree(paths.job_dir, ignore_errors=True)


def submit_first(
    able: list[Offer], say: Callable[[str], None], through_login: Callable[[Offer], Racer] | None = None
) -> Racer:
    """Submit to every cluster in ``able`` (earliest estimated start first; one reached through
    its login node by ``through_login``), keep the first that starts, cancel and remove the
    others; the kept one."""
    placed: list[Racer] = []
    try:
        for offer in able:
            try:
                if offer.login:
                    assert through_login is not None, "a cluster asked through its login node races there"
                    placed.append(through_login(offer))
                    continue
                assert offer.spec is not None and offer.opts is not None and offer.client is not None
                gated = offer.opts.model_copy(update={"start_gate_s": GATE_S})
                placed.append(Placed(offer, submit(offer.spec, gated, offer.client)))
            except SlurmRlError as exc:  # the others still race
                say(f"--cluster first: cluster {offer.name}: not submitted: {' '.join(str(exc).split())[:300]}")
        if not placed:
            raise UsageError("--cluster first: no cluster took the job (each said why above)")
        say(
            f"--cluster first: submitted {', '.join(p.label for p in placed)}; the first to start runs, "
            "the others are cancelled before they start"
        )
        kept = _first_started(placed, say)
        kept.go()
    except BaseException:  # Ctrl-C, every job ended: none of them runs
        _drop(placed, say)
        raise
    _drop([p for p in placed if p is not kept], say)
    say(f"--cluster first: {kept.label} started first; kept")
    return kept


def _first_started(placed: list[Racer], say: Callable[[str], None]) -> Racer:
    waiting, said = list(placed), ""
    with ThreadPoolExecutor(max_workers=min(16, len(placed))) as pool:
        while True:
            looked = list(zip(waiting, pool.map(lambda p: p.state(), waiting), strict=True))
            for p, st in looked:
                if st is not None and st.state in STARTED:
                    return p  # the earliest estimate among those started at once
            for p, st in looked:
                if st is not None and not st.in_queue:
                    say(f"--cluster first: {p.label} ended before it started ({st.state}); the others still race")
                    waiting.remove(p)
            if not waiting:
                raise JobError("--cluster first: every job ended before one started (each said how above)")
            line = ", ".join(_queued(p, st) for p, st in looked if p in waiting)
            if line != said:
                say(f"--cluster first: waiting: {line}")
                said = line
            time.sleep(POLL_S)


def _queued(p: Racer, st: JobState | None) -> str:
    if st is None:
        return f"{p.label} (no answer)"
    return f"{p.label} {st.state}" + (f" ({st.reason})" if st.reason and st.reason != "None" else "")


def _drop(placed: list[Racer], say: Callable[[str], None]) -> None:
    """Each cancelled and gone, at once."""
    if not placed:
        return
    with ThreadPoolExecutor(max_workers=min(16, len(placed))) as pool:
        list(pool.map(lambda p: p.drop(say), placed))
    say(f"--cluster first: cancelled {', '.join(p.label for p in placed)}")
