"""Preflight under --heal (job/preflight_replace.py): node 0 replaces a worker node preflight
found bad with a member job instead of sending the job again, the node leaves on its word (its
Ray up or failed), its Ray's end is no loss, and what cannot be replaced (the head's own node,
more bad nodes than replacements left) goes the usual way. Two nodes of one job dir on this
machine, the member watch fed a scripted Ray node table."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from slurm_rl.core import causes as c
from slurm_rl.core.causes import Cause
from slurm_rl.core.events import append_event, read_events
from slurm_rl.core.members import member_history as healing_history
from slurm_rl.core.node_verdict import Check, NodeResult
from slurm_rl.job import node_checks as preflight
from slurm_rl.job import preflight_replace as replace
from slurm_rl.job.member_watch import MemberWatch
from slurm_rl.login.reading.job_tables import healing_lines
from tests.unit.test_preflight import _node

FULL = Check("disk", False, "0.0 GiB free in /tmp/srl-9 (needs 1.0 GiB)")
GOOD = (Check("disk", True, "fine"), Check("fabric", True, "fine"), Check("python", True, "fine"))
UP = {"h": (True, "10.0.0.1"), "w": (True, "10.0.0.2")}


def job(tmp_path: Path, heal: int = 1, bad: dict[int, Check] | None = None):  # type: ignore[no-untyped-def]
    """Head and worker of a 2-node job with --preflight --heal HEAL, each rank's result published
    (good, or BAD's check), and the head's member watch having seen both nodes' Ray up."""
    head, worker = (_node(tmp_path / "91", rank, heal=heal) for rank in (0, 1))
    for ctx, ip in ((head, "10.0.0.1"), (worker, "10.0.0.2")):
        append_event(ctx.paths.events, "node_start", node=ctx.node, ip=ip, attempt=ctx.attempt, rank=ctx.rank)
        found = (bad or {}).get(ctx.rank)
        checks = (found, *GOOD[1:]) if found else GOOD
        preflight.NodePreflight(ctx).publish(NodeResult(ctx.node, ctx.rank, checks, True, 0.1))
    members = MemberWatch(head, "x")
    members.observe(UP)
    return head, worker, members


def test_a_bad_worker_leaves_and_a_member_job_replaces_it_before_the_driver_starts(tmp_path: Path) -> None:
    head, worker, members = job(tmp_path, bad={1: FULL})
    passed: list[bool] = []
    verdict = threading.Thread(target=lambda: passed.append(preflight.preflight_passed(head, members)))
    verdict.start()
    request = head.paths.members / "1.request"
    assert replace_wait(lambda: request.exists() and replace.leaving(worker) is not None)
    assert request.read_text() == "1 node1,node2 heal\n"  # never a node the job has or had
    assert replace.leaving(worker) == ["node2"] and replace.LeaveWatch(worker).told()
    assert not passed  # the driver waits for the replacement
    append_event(head.paths.events, "node_start", node="node3", ip="10.0.0.3", attempt=head.attempt, rank=1000)
    members.observe({**UP, "m": (True, "10.0.0.3")})
    verdict.join(timeout=10)
    assert passed == [True] and head.failure is None
    assert preflight.found_bad(head) is None  # a later failure (a cancel, a lost node) is not node2's
    assert head.paths.bad_nodes.read_text().split() == ["node2"]  # a later attempt is not given it either
    members.observe({"h": UP["h"], "w": (False, "10.0.0.2"), "m": (True, "10.0.0.3")})  # the bad one's Ray goes
    assert not (head.paths.members / "2.request").exists() and head.failure is None  # no loss, no second ask
    names = [e["event"] for e in read_events(head.paths.events) if e["event"] != "node_start"]
    assert names == [
        "preflight_verdict",
        "replacement_requested",
        "preflight_replacing",
        "replacement_joined",
        "preflight_replaced",
        "node_left",
    ], names
    said = healing_lines(healing_history(read_events(head.paths.events)))  # what `status JOB` shows
    assert said[1].endswith(f" preflight: node2 failed the check disk: {FULL.found}; replaced by member 1"), said
    assert said[-1].endswith(" node2 left the job: preflight found it bad; replaced"), said


def test_a_failed_replacement_fails_the_job_naming_what_preflight_found(tmp_path: Path) -> None:
    head, _, members = job(tmp_path, bad={1: FULL})
    members.retire("node2", f"failed the check disk ({FULL.found})", Cause(c.PREFLIGHT, "node2", check="disk"))
    (head.paths.members / "1.error").write_text("sbatch: error: Invalid account\n")
    failures: list[tuple[str, Cause | None]] = []
    head.fail = lambda reason, cause=None: failures.append((reason, cause))  # type: ignore[method-assign]
    members.check_pending()
    [(reason, cause)] = failures
    assert reason == (
        f"node node2 failed the check disk ({FULL.found}) and its replacement (member job 1) failed: "
        "sbatch: error: Invalid account"
    )
    assert cause == Cause(c.PREFLIGHT, "node2", check="disk")


@pytest.mark.parametrize(
    ("heal", "bad"),
    [(1, {0: FULL}), (0, {1: FULL})],
    ids=["the-head-s-own-node", "no-heal"],
)
def test_what_cannot_be_replaced_goes_again_without_it(tmp_path: Path, heal: int, bad: dict[int, Check]) -> None:
    head, worker, members = job(tmp_path, heal=heal, bad=bad)
    assert not preflight.preflight_passed(head, members)
    assert head.failure is not None and "(--on-bad-node exclude)" in head.failure
    assert not head.paths.members.exists() or not list(head.paths.members.glob("*.request"))
    assert replace.leaving(worker) == ([] if heal else None)  # the word is in: nobody leaves
    assert not replace.wait_replaced(worker)


def test_a_bad_worker_whose_ray_failed_waits_for_the_word_then_ends_quietly(tmp_path: Path) -> None:
    head, worker, _ = job(tmp_path, bad={1: FULL})
    threading.Timer(0.5, lambda: replace.publish_leaving(head, ["node2"])).start()
    assert replace.wait_replaced(worker)  # its failure is no failure of the job: it was replaced
    other = _node(tmp_path / "92", 1, heal=1)
    preflight.NodePreflight(other).publish(NodeResult(other.node, 1, GOOD, True, 0.1))
    replace.publish_leaving(_node(tmp_path / "92", 0, heal=1), [])
    assert not replace.wait_replaced(other)  # good, and nobody leaves: its failure is the job's


def replace_wait(cond, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False
