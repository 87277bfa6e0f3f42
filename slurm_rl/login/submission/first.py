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

from ...core.errors import JobError, SlurmRlError, UsageError
from ...slurm import JobState
from .choose import Offer
from .submit import Submitted, submit

GATE_S = 600  # a started job waits this long for the go (the submitter looks every POLL_S)
POLL_S = 1.0
GONE_S = 60.0  # a cancelled job's time to leave its queue before its dir goes anyway
STARTED = {"RUNNING", "CONFIGURING"}  # SLURM gave it its nodes: its batch script is at the gate


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


def submit_first(able: list[Offer], say: Callable[[str], None]) -> tuple[Offer, Submitted]:
    """Submit to every cluster in ``able`` (earliest estimated start first), keep the first that
    starts, cancel and remove the others; the kept cluster's offer and submission."""
    placed: list[Placed] = []
    try:
        for offer in able:
            assert offer.spec is not None and offer.opts is not None and offer.client is not None
            gated = offer.opts.model_copy(update={"start_gate_s": GATE_S})
            try:
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
        kept.res.paths.start_go.touch()
    except BaseException:  # Ctrl-C, every job ended: none of them runs
        _drop(placed, say)
        raise
    _drop([p for p in placed if p is not kept], say)
    say(f"--cluster first: {kept.label} started first; kept")
    return kept.offer, kept.res


def _first_started(placed: list[Placed], say: Callable[[str], None]) -> Placed:
    waiting, said = list(placed), ""
    with ThreadPoolExecutor(max_workers=min(16, len(placed))) as pool:
        while True:
            looked = list(zip(waiting, pool.map(Placed.state, waiting), strict=True))
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


def _queued(p: Placed, st: JobState | None) -> str:
    if st is None:
        return f"{p.label} (no answer)"
    return f"{p.label} {st.state}" + (f" ({st.reason})" if st.reason and st.reason != "None" else "")


def _drop(placed: list[Placed], say: Callable[[str], None]) -> None:
    """Cancel each, and once SLURM has let it go (bounded), remove its job dir: nothing of it stays."""
    if not placed:
        return

    def drop(p: Placed) -> None:
        assert p.offer.client is not None
        try:
            p.offer.client.scancel(p.res.job_id)
        except SlurmRlError as exc:
            say(f"--cluster first: {p.label}: cancel failed ({exc}); `slurm-rl teardown {p.label}`")
            return
        deadline = time.monotonic() + GONE_S
        while time.monotonic() < deadline:
            st = p.state()
            if st is not None and not st.in_queue:
                break
            time.sleep(POLL_S / 2)
        shutil.rmtree(p.res.paths.job_dir, ignore_errors=True)

    with ThreadPoolExecutor(max_workers=min(16, len(placed))) as pool:
        list(pool.map(drop, placed))
    say(f"--cluster first: cancelled {', '.join(p.label for p in placed)}")
