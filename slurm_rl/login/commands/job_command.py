"""What every job command shares, in one place: its job argument, --spec, --json and --login
(job_command), and the one object it works with (Session: the spec, the user, the SLURM client,
built here and nowhere else for the commands). A new option of every job command is a line
here, not one per command.

Where a command runs is a property of the command: a RemoteCommand (every job command is one)
has --login and, when the entry point gave it a forwarder (laptop/cli.py's, as click's
``obj``), asks it first whether to run on a login node instead of here."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from ...config.spec import SPEC_ENV_VAR, ClusterSpec, load_spec, resolve_spec_path
from ...core.errors import UsageError
from ...core.paths import current_user

if TYPE_CHECKING:
    from ...config.clusters import Cluster
    from ...core.job_id import JobId
    from ...core.paths import JobPaths
    from ...slurm import SlurmClient

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
SPEC_HELP = f"Cluster spec (default: ${SPEC_ENV_VAR})."
LOCAL = "local"  # --login local: run here even if the spec names a login node
CLUSTER_HELP = (
    "A cluster of `slurm-rl clusters` (its spec and login host), instead of --spec; submit: 'auto' for the one "
    "SLURM would start it on first, 'first' to submit to every cluster that can run it and keep the first to start."
)
CHOOSERS = {"auto": ("submit", "sweep"), "first": ("submit",)}  # the commands that choose for themselves
CHOOSING = tuple(CHOOSERS)
SPANNING = ("list",)  # with a clusters file: of every cluster, asked from here, never one login node's
LOGIN_HELP = (
    'Run on this login node over ssh (default: $SLURM_RL_LOGIN, else the spec\'s "login" where no '
    f"SLURM is installed here; '{LOCAL}': here)."
)


class Forwarder:
    """Runs a command on a login node: the laptop's entry point passes one (laptop/cli.py's) as
    click's ``obj``; here, where a command would run and the run itself."""

    def target(self, name: str, flag: str | None, params: dict[str, Any]) -> str | None:
        raise NotImplementedError

    def forward(self, name: str, command: click.Command, params: dict[str, Any], target: str) -> int:
        raise NotImplementedError

    def capture(self, name: str, command: click.Command, params: dict[str, Any], target: str) -> tuple[int, str, str]:
        """The command run there, its exit code, stdout and stderr captured."""
        raise NotImplementedError


class RemoteCommand(click.Command):
    """A command that may run on a login node: it has --login, and the entry point's forwarder
    (click's ``obj``) decides before the command runs here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if any(p.name == "spec_flag" for p in self.params):  # a command of a cluster: name it instead
            self.params.append(click.Option(["--cluster"], metavar="NAME", default=None, help=CLUSTER_HELP))
            # the name a laptop knows the cluster by, passed to its login node (which may not)
            self.params.append(click.Option(["--as-cluster"], default=None, hidden=True))
        self.params.append(click.Option(["--login"], metavar="[USER@]HOST", default=None, help=LOGIN_HELP))

    def invoke(self, ctx: click.Context) -> Any:
        flag = ctx.params.pop("login", None)
        cluster = ctx.params.pop("cluster", None)
        label = ctx.params.pop("as_cluster", None)  # typed on a laptop as --cluster NAME
        if label and not cluster:
            ctx.meta["cluster"] = label  # submit prints the id with it, as there
        if cluster in CHOOSING:  # the command chooses among the clusters itself (submit)
            if self.name not in CHOOSERS.get(cluster, ()):
                which = "submit and sweep choose" if cluster == "auto" else "only submit races"
                raise UsageError(f"--cluster {cluster}: {which} a cluster; name one here")
            named_cluster(cluster, ctx.params, load=False)
            ctx.meta["cluster_choice"] = cluster
        elif cluster:  # the clusters file's spec (and login host) for it, as if --spec (and --login) said them
            entry = named_cluster(cluster, ctx.params)
            assert entry is not None
            ctx.params["spec_flag"] = entry.spec
            ctx.meta["cluster"] = cluster  # submit prints the id with it (CLUSTER:JOBID)
            flag = entry.login if flag is None and entry.login else flag
        forwarder = ctx.find_object(Forwarder)
        name = ctx.command_path.split(" ", 1)[1] if " " in ctx.command_path else self.name or ""
        choice = ctx.meta.get("cluster_choice")
        if choice and flag in (None, "", LOCAL):
            return super().invoke(ctx)  # it chooses here, never in the default spec's login's place
        if name in SPANNING and flag is None and not cluster and not ctx.params.get("spec_flag") and _named():
            return super().invoke(ctx)  # every named cluster's, each asked where it answers (list_remote.py)
        if forwarder is None:
            if flag not in (None, "", LOCAL):
                raise UsageError(f"--login {flag}: this entry point runs commands here only; use `slurm-rl`")
            return super().invoke(ctx)
        target = forwarder.target(name, flag, ctx.params)
        if target is None:
            return super().invoke(ctx)
        chooses = {"cluster": choice} if choice else {}  # --login HOST: HOST chooses among its clusters
        named = {"as_cluster": cluster} if cluster and "as_cluster" in {p.name for p in self.params} else {}
        sys.exit(forwarder.forward(name, self, {**ctx.params, **chooses, **named}, target))


def _named() -> bool:
    from ...config.clusters import load_clusters

    return bool(load_clusters())


def named_cluster(name: str, params: dict[str, Any], load: bool = True) -> Cluster | None:
    """A --cluster's entry, its spec loaded (a broken one names the cluster); a spec named as
    well is one line."""
    from ...config.clusters import cluster_entry, cluster_spec

    given = params.get("spec_flag") or next(iter(a for a in params.get("args") or () if a.endswith(".json")), None)
    if given:
        raise UsageError(f"--cluster {name} and the spec {given}: give one (the cluster names its spec)")
    if not load:
        return None
    entry = cluster_entry(name)
    cluster_spec(name)
    return entry


@dataclass
class Session:
    """One job command's world: the spec (--spec, else $CLUSTER_SPEC_PATH, else the local
    default), the user, and the SLURM client, each made once, when first used."""

    spec_flag: str | None = None
    as_json: bool = False

    @functools.cached_property
    def spec(self) -> ClusterSpec:
        return load_spec(self.spec_flag)

    @functools.cached_property
    def user(self) -> str:
        return current_user()

    @functools.cached_property
    def client(self) -> SlurmClient:  # a spec named (--spec, --cluster, $CLUSTER_SPEC_PATH) may say how
        return slurm_client(self.spec if resolve_spec_path(self.spec_flag) else None)

    def pin_job(self, text: str) -> str:
        """A job argument's cluster, where a clusters file names several: ``CLUSTER:JOBID`` says
        it; a bare id only one named cluster has is that one's; one that several have is refused,
        the ways to say which named. The session then has that cluster's spec and SLURM client.
        Returns the id without its cluster."""
        from ...config.clusters import cluster_entry, cluster_spec, load_clusters
        from ..reading import index

        named = load_clusters()
        if not named or (":" not in text and self.spec_flag):  # no clusters, or a spec (--spec, --cluster) says which
            return text

        def holders(job: str) -> list[str]:
            on = index.clusters_of(job)
            return [n for n in named if cluster_spec(n).cluster_name in on]

        cluster, bare = job_cluster(text, named, holders)
        if cluster is not None:
            self.use_cluster(cluster_entry(cluster).spec)
        return bare

    def use_cluster(self, spec_path: str) -> None:
        self.spec_flag = spec_path
        for made in ("spec", "client"):  # made again for that cluster when next used
            self.__dict__.pop(made, None)

    def job(self, text: str) -> tuple[JobId, JobPaths]:
        """A job by what the user typed (a SLURM id, ARRAYID_TASK, a local run's id), and its dir."""
        from ..reading.lookup import resolve_job

        return resolve_job(text, self.user, self.client, self.spec)


def job_cluster(text: str, named: dict[str, Any], holders: Callable[[str], list[str]]) -> tuple[str | None, str]:
    """Which of the ``named`` clusters a job argument is, and its bare id: ``CLUSTER:JOBID``
    says it (a name not among them is refused); a bare id is the one cluster ``holders(id)``
    names (None where none does; several are refused, the ways to say which named). Decided
    here for a login node's session (Session.pin_job) and a laptop's forward (job_remote.py)."""
    from ...config.clusters import known

    name, sep, bare = text.partition(":")
    if sep:
        if name not in named:
            raise UsageError(f"job {text}: no cluster {name!r}; {known(named)}")
        return name, bare
    names = sorted(holders(text))
    if len(names) > 1:
        ways = " or ".join(f"`{n}:{text}`" for n in names)
        raise UsageError(f"job {text}: clusters {', '.join(names)} each have a job {text}; say which: {ways}")
    return (names[0] if names else None), text


def slurm_client(spec: ClusterSpec | None = None) -> SlurmClient:
    """The commands' SLURM client: made here only (a Session's, and submit's, render's, sweep's,
    doctor's and images' own); for a spec with ``slurm_conf``, that cluster's."""
    from ...slurm import SlurmClient

    return SlurmClient(slurm_conf=spec.slurm_conf if spec is not None else None)


def spec_option() -> Callable[..., Any]:
    return click.option("--spec", "spec_flag", metavar="PATH", help=SPEC_HELP)


def job_command(
    name: str | None = None,
    *,
    job: str | None = "required",
    json_help: str | None = None,
    argument: str = "job",
    argument_type: Any = None,
    hidden: bool = False,
) -> Callable[[Callable[..., Any]], click.Command]:
    """A job command: ``f(session, JOB, **its own options)``. It gets the job argument (``job``:
    "required", "optional" or None for none), --spec, --json where ``json_help`` says what it
    prints, --login (RemoteCommand), and one Session."""

    def decorate(f: Callable[..., Any]) -> click.Command:
        @functools.wraps(f)
        def callback(spec_flag: str | None, **params: Any) -> Any:
            session = Session(spec_flag, bool(params.get("as_json")) if json_help else False)
            if job and isinstance(params.get(argument), str):  # CLUSTER:JOBID, or the one cluster with it
                params[argument] = session.pin_job(params[argument])
            return f(session, **params)

        own = list(getattr(f, "__click_params__", []))  # the command's own, as click attached them
        common: list[click.Parameter] = [click.Option(["--spec", "spec_flag"], metavar="PATH", help=SPEC_HELP)]
        if json_help:
            common.append(click.Option(["--json", "as_json"], is_flag=True, help=json_help))
        first = [click.Argument([argument], required=job == "required", type=argument_type)] if job else []
        callback.__click_params__ = [*common, *own, *first]  # type: ignore[attr-defined]  # click reverses
        return click.command(name, cls=RemoteCommand, context_settings=CONTEXT, hidden=hidden)(callback)

    return decorate
