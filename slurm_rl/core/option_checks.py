"""The job options' checks across fields (core/options.py calls them after each field's own
rule): contradictions, and combinations SLURM or slurm-rl cannot run; each names one field."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .fields import FieldProblem, time_minutes
from .nodelist import expand_hostlist
from .option_rules import signal_seconds, warning_for

if TYPE_CHECKING:
    from .options import JobOptions


def check_combinations(opts: JobOptions) -> None:
    warning_before_the_limit(opts)
    site_options_agree(opts)
    array_or_chain(opts)
    min_nodes_and_heal(opts)
    requeue_options(opts)
    parts_combinations(opts)


def warning_before_the_limit(opts: JobOptions) -> None:
    if opts.time is not None and signal_seconds(opts.signal) >= time_minutes(opts.time) * 60:
        raise FieldProblem(
            "signal",
            repr(opts.signal),
            f"warns {signal_seconds(opts.signal)} s before a time limit of {opts.time} "
            f"({time_minutes(opts.time) * 60:g} s); warn sooner, e.g. --signal B:USR2@{warning_for(opts.time)}",
        )


def parts_combinations(opts: JobOptions) -> None:
    """What a job of parts cannot do (yet): each refused naming the flag and why."""
    if not opts.parts:
        return
    why = {
        "array": "a job of parts is a heterogeneous job, which SLURM cannot run as a job array; "
        "submit one job per point",
        "heal": "replacing lost nodes of a part is not supported yet; drop --heal",
        "min_nodes": "a job of parts starts when every part's nodes are up; drop --min-nodes",
        "head_partition": "the Ray head runs on the first Ray part's first node; drop --head-partition",
        "segment": "give each part its nodes in the parts file; drop --segment",
        "nodelist": "give each part its nodes in the parts file; drop --nodelist",
        "preflight": "preflight checks plain jobs' nodes only (yet); drop --preflight",
    }
    given = {
        "array": opts.array,
        "heal": opts.heal,
        "min_nodes": opts.min_nodes,
        "head_partition": opts.head_partition,
        "segment": opts.segment,
        "nodelist": opts.nodelist,
        "preflight": opts.preflight,
    }
    for name, value in given.items():
        if value:
            raise FieldProblem(name, repr(value), f"with --parts: {why[name]}")
    if opts.head_node == "cpu":
        raise FieldProblem(
            "head_node", "'cpu'", "with --parts: the Ray head runs on the first Ray part's first node; drop it"
        )


def requeue_options(opts: JobOptions) -> None:
    """What --stall-action requeue and --retry-on need (a stall timeout, --requeue's budget)."""
    if opts.stall_action and not opts.stall_timeout:
        raise FieldProblem(
            "stall_action", repr(opts.stall_action), "acts on a stall: give --stall-timeout too (e.g. 30m)"
        )
    if opts.stall_action == "requeue" and opts.requeue < 1:
        raise FieldProblem("stall_action", "'requeue'", "requeues within --requeue's budget: add --requeue N (N >= 1)")
    if opts.retry_on and opts.requeue < 1:
        why = "retries within --requeue's budget: add --requeue N (N >= 1)"
        raise FieldProblem("retry_on", repr(opts.retry_on), why)


def site_options_agree(opts: JobOptions) -> None:
    if opts.mem and opts.mem_per_cpu:
        raise FieldProblem("mem_per_cpu", opts.mem_per_cpu, "contradicts --mem (SLURM takes one of the two)")
    if opts.exclusive and opts.oversubscribe:
        raise FieldProblem("oversubscribe", True, "contradicts --exclusive")
    placed = opts.nodes if opts.head_partition else opts.total_nodes
    if opts.segment and placed % opts.segment:
        raise FieldProblem("segment", opts.segment, f"must divide the job's {placed} nodes (whole segments)")
    if opts.nodelist:
        named = set(expand_hostlist(opts.nodelist))
        if len(named) > opts.nodes:
            raise FieldProblem("nodelist", repr(opts.nodelist), f"names {len(named)} nodes but --nodes is {opts.nodes}")
        both = sorted(named & set(expand_hostlist(opts.exclude or "")))
        if both:
            raise FieldProblem("nodelist", repr(opts.nodelist), f"and --exclude both name {', '.join(both)}")


def array_or_chain(opts: JobOptions) -> None:
    if opts.array and opts.heterogeneous:
        raise FieldProblem(
            "head_partition",
            repr(opts.head_partition),
            "makes a heterogeneous job, which SLURM cannot run as a job array (a sweep); "
            "drop it (--head-node cpu works in a sweep)",
        )
    if opts.array and opts.chain > 1:
        raise FieldProblem("chain", opts.chain, "does not combine with a sweep; submit the sweep without it")


def min_nodes_and_heal(opts: JobOptions) -> None:
    if opts.min_nodes is not None and not 1 <= opts.min_nodes <= opts.total_nodes:
        raise FieldProblem("min_nodes", opts.min_nodes, f"must be 1..{opts.total_nodes} (the job's Ray nodes)")
    if opts.heal and opts.total_nodes < 2:
        raise FieldProblem("heal", opts.heal, "replaces worker nodes: the job needs --nodes 2 or more")
    if opts.heal and opts.heterogeneous:
        raise FieldProblem("heal", opts.heal, "does not combine with --head-partition yet; use --head-node cpu")
