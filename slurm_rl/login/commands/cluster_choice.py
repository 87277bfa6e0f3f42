"""How submit and sweep choose among the named clusters (--cluster auto|first): the job's options
resolved against each cluster's spec and each cluster asked at once (login/submission/choose.py),
one reached only through its login node asked there (a laptop's: `submit --estimate` over the
entry point's forwarder), and the race of --cluster first (login/submission/first.py)."""

from __future__ import annotations

import json
import sys
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from ...config.spec import ClusterSpec
from ...core.errors import UsageError
from ...core.options import JobOptions
from ...core.paths import current_user
from ..submission.choose import Offer
from ..submission.resolve import resolve_options

if TYPE_CHECKING:
    from ...slurm import SlurmClient


def _per_cluster(kw: dict[str, Any]) -> Callable[[ClusterSpec], JobOptions]:
    """The job's options, resolved against whichever cluster's spec is asked."""
    args, _ = list(kw.pop("args")), kw.pop("spec_flag")
    experiment, exp_args = (args[0], tuple(args[1:])) if args else (None, ())

    def resolve(spec: ClusterSpec) -> JobOptions:
        return resolve_options(spec, experiment, experiment_args=exp_args, user=current_user(), **dict(kw))

    return resolve


def resolve_chosen(kw: dict[str, Any]) -> tuple[ClusterSpec, JobOptions, SlurmClient, str]:
    """--cluster auto: the job's options resolved against every named cluster's spec, each asked
    in parallel (login/submission/choose.py), a cluster reached only through its login node
    asked there (`submit --estimate`); the choice, and why, said on stderr. A cluster chosen
    through its login node gets the command as typed there, and this process exits with it."""
    from ..submission.choose import choice_said, choose_cluster
    from .job_command import slurm_client

    chosen, lines = choose_cluster(_per_cluster(kw), slurm_client, _through_login(click.get_current_context()))
    click.echo(f"slurm-rl: {choice_said(chosen, lines)}", err=True)
    if chosen.login:
        _forward_to_chosen(chosen)
    assert chosen.spec is not None and chosen.opts is not None and chosen.client is not None
    return chosen.spec, chosen.opts, chosen.client, chosen.name


def _through_login(ctx: click.Context) -> Callable[[str, Any], tuple[float, int | None]] | None:
    """How a laptop asks a cluster through its login node: the command as typed, its spec the
    cluster's, run there with --estimate (the code it names goes along, as for a submit)."""
    from .job_command import Forwarder

    forwarder = ctx.find_object(Forwarder)
    root = ctx.find_root().command
    if forwarder is None or not isinstance(root, click.Group) or "submit" not in root.commands:
        return None
    command, params = root.commands["submit"], dict(ctx.params)  # a sweep asks as its task 0 would

    def asked(name: str, entry: Any) -> tuple[float, int | None]:
        typed = {**params, "spec_flag": entry.spec, "estimate": True, "dry_run": False, "wait": False}
        rc, out, err = forwarder.capture("submit", command, typed, entry.login)
        said = [ln for ln in err.splitlines() if ln.strip()]
        if rc != 0 or not out.strip():
            raise UsageError((said[-1] if said else f"exit {rc}").removeprefix("slurm-rl: error: "))
        answer = json.loads(out.strip().splitlines()[-1])
        return float(answer["start"]), answer.get("waiting")

    return asked


def _forward_to_chosen(chosen: Offer) -> typing.NoReturn:
    """The command as typed, run on the chosen cluster's login node with that cluster's spec."""
    from ...config.clusters import cluster_entry
    from .job_command import Forwarder

    ctx = click.get_current_context()
    forwarder = ctx.find_object(Forwarder)
    assert forwarder is not None and chosen.login
    typed = {**ctx.params, "spec_flag": cluster_entry(chosen.name).spec, "as_cluster": chosen.name}
    sys.exit(forwarder.forward(ctx.command.name or "submit", ctx.command, typed, chosen.login))


def resolve_able(kw: dict[str, Any]) -> list[Offer]:
    """--cluster first: every named cluster that can run the job (asked as auto asks), earliest
    estimate first; each cluster's answer said on stderr."""
    from ..submission.choose import ask_all
    from .job_command import slurm_client

    able, lines = ask_all(_per_cluster(kw), slurm_client, "first", _through_login(click.get_current_context()))
    click.echo(f"slurm-rl: --cluster first: {', '.join(o.name for o in able)} (" + "; ".join(lines) + ")", err=True)
    return able


def submit_first_cmd(
    able: list[Offer], dry_run: bool, wait: bool, as_json: bool, hold: bool, after: Callable[..., None]
) -> None:
    """--cluster first, as `submit` takes it: the race (login/submission/first.py), then what
    submit does after any submission (``after``; a job kept on a cluster reached through its
    login node: there)."""
    from ..submission.first import GATE_S, Placed, submit_first
    from ..submission.plan import preview_plan
    from ..submission.render import render_job
    from .race_remote import LoginRacer, through_login

    lead = able[0]
    ctx = click.get_current_context()
    chain = next((o.opts.chain for o in able if o.opts is not None), int(ctx.params.get("chain") or 1))
    if hold or chain > 1:
        raise UsageError(f"--cluster first: {'--hold' if hold else '--chain'} is not for a race; name a cluster")
    if dry_run:  # the gated script of the earliest estimate; nothing submitted anywhere
        names = [o.name for o in able]
        said: dict[str, Any] = {"cluster": lead.name, "clusters": names, "submitted": False}
        if lead.login:  # its script is made on its login node: the choice only
            click.echo(json.dumps(said) if as_json else f"--cluster first would race {', '.join(names)}")
            return
        assert lead.spec is not None and lead.opts is not None and lead.client is not None
        gated = lead.opts.model_copy(update={"start_gate_s": GATE_S})
        job = render_job(preview_plan(lead.spec, gated, lead.client))
        click.echo(json.dumps({"script": job.script, **said})) if as_json else click.echo(job.script, nl=False)
        return
    kept = submit_first(able, lambda line: click.echo(f"slurm-rl: {line}", err=True), through_login(ctx))
    if isinstance(kept, LoginRacer):
        sys.exit(kept.follow(wait, as_json))
    assert isinstance(kept, Placed) and kept.offer.client is not None
    try:
        after(kept.res, kept.offer.opts, kept.offer.client, wait, as_json, kept.offer.name)
    except KeyboardInterrupt:
        from .job_cmds import still_running

        still_running(kept.res.job_id)
