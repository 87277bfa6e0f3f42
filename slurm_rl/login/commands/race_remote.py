"""The jobs of a `submit --cluster first` race on clusters a laptop reaches only through their
login nodes: each submitted there as typed behind its start gate (`submit --start-gate-s`), and
then looked at, given the go and dropped there by the hidden `race` command
(login/commands/race_cmds.py), all over the entry point's forwarder. The race itself is
login/submission/first.py's, the same as for a cluster whose SLURM answers here."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from ...core.errors import SlurmRlError, UsageError
from ...slurm import JobState
from ..submission.choose import Offer
from ..submission.first import GATE_S
from .job_command import Forwarder


@dataclass(frozen=True)
class LoginRacer:
    name: str
    login: str
    spec: str  # the laptop's spec of the cluster (the forwarder sends it along)
    job_id: int
    forwarder: Forwarder
    race: click.Command

    @property
    def label(self) -> str:
        return f"{self.name}:{self.job_id}"

    def _race(self, **flags: Any) -> tuple[int, str, str]:
        params = {"job": str(self.job_id), "spec_flag": self.spec, **flags}
        return self.forwarder.capture("race", self.race, params, self.login)

    def state(self) -> JobState | None:
        try:
            rc, out, _ = self._race(look=True)
        except SlurmRlError:
            return None  # no answer this time: asked again at the next look
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if rc != 0 or not lines:
            return None
        said = json.loads(lines[-1])
        return JobState(self.job_id, str(said["state"]), reason=str(said.get("reason") or ""))

    def go(self) -> None:
        rc, _, err = self._race(go=True)
        if rc != 0:
            raise SlurmRlError(f"--cluster first: {self.label}: the go did not reach it: {_last(err, rc)}")

    def drop(self, say: Callable[[str], None]) -> None:
        try:
            rc, _, err = self._race(drop=True, named=self.name)
        except SlurmRlError as exc:
            rc, err = 1, str(exc)
        if rc != 0:
            say(f"--cluster first: {self.label}: cancel failed ({_last(err, rc)}); `slurm-rl teardown {self.label}`")

    def follow(self, wait: bool, as_json: bool) -> int:
        """What submit prints after its submission, from the login node (--wait: to the end)."""
        params = {"job": str(self.job_id), "spec_flag": self.spec, "wait": wait, "as_json": as_json, "named": self.name}
        return self.forwarder.forward("race", self.race, params, self.login)


def _last(err: str, rc: int) -> str:
    said = [ln for ln in err.splitlines() if ln.strip()]
    return (said[-1] if said else f"exit {rc}").removeprefix("slurm-rl: error: ")


def through_login(ctx: click.Context) -> Callable[[Offer], LoginRacer] | None:
    """How a laptop places its job on a cluster of the race reached through its login node: the
    command as typed, that cluster's spec, behind the start gate."""
    from ...config.clusters import cluster_entry

    forwarder = ctx.find_object(Forwarder)
    root = ctx.find_root().command
    if forwarder is None or not isinstance(root, click.Group) or "race" not in root.commands:
        return None
    submit, race, params = root.commands["submit"], root.commands["race"], dict(ctx.params)

    def place(offer: Offer) -> LoginRacer:
        spec = cluster_entry(offer.name).spec
        typed = {**params, "spec_flag": spec, "gate_s": GATE_S, "as_json": True, "wait": False, "dry_run": False}
        rc, out, err = forwarder.capture("submit", submit, typed, offer.login)
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if rc != 0 or not lines:
            raise UsageError(_last(err, rc))
        return LoginRacer(offer.name, offer.login, spec, int(json.loads(lines[-1])["job_id"]), forwarder, race)

    return place
