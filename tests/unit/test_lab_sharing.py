"""The lab lock of the two lab-test streams (tests/lab/sharing.py): shared tests run together, an
exclusive one runs alone, and a waiting exclusive one goes before a shared one that comes later;
the order of the lab tests (tests/conftest.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.conftest import lab_order, lab_order_alone
from tests.lab.sharing import STREAMS_ENV, TAIL_MODULES, LabLock, in_tail, note_running, refuse_oversubscribe, stream


def taken_in_thread(lock: LabLock, exclusive: bool) -> threading.Event:
    done = threading.Event()

    def take() -> None:
        lock.take(exclusive)
        done.set()

    threading.Thread(target=take, daemon=True).start()
    return done


def test_two_shared_at_once_an_exclusive_waits_and_goes_before_a_later_shared(tmp_path: Path) -> None:
    first, second, writer, late = (LabLock(tmp_path) for _ in range(4))  # four streams' open files
    first.take(exclusive=False)
    second.take(exclusive=False)  # beside the first at once
    alone = taken_in_thread(writer, exclusive=True)
    assert not alone.wait(0.3)  # waits for both shared tests
    later = taken_in_thread(late, exclusive=False)
    assert not later.wait(0.3)  # the waiting exclusive test holds the turnstile
    first.release()
    assert not alone.wait(0.3)
    second.release()
    assert alone.wait(5)
    assert not later.wait(0.3)  # nothing beside the exclusive one
    writer.release()
    assert later.wait(5)
    late.release()


def test_an_exclusive_hold_covers_the_next_tests_and_a_second_take_is_a_no_op(tmp_path: Path) -> None:
    mine, other = LabLock(tmp_path), LabLock(tmp_path)
    mine.take(exclusive=True)
    mine.take(exclusive=False)  # the next test, while the hold is kept: still exclusive
    assert mine.held == "exclusive"
    waiting = taken_in_thread(other, exclusive=False)
    assert not waiting.wait(0.3)
    mine.release()
    assert waiting.wait(5)
    other.release()
    assert other.held is None


class Item:
    """What the ordering reads of a collected test: its marks (an xdist group among them) and file."""

    def __init__(self, name: str, *marks: str, group: str = "lab", module: str = "test_x.py") -> None:
        self.name, self.marks, self.group, self.path = name, marks, group, Path("tests/lab", module)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None

    def iter_markers(self, name: str) -> list[pytest.MarkDecorator]:
        return [pytest.mark.xdist_group(self.group)] if name == "xdist_group" else []


def test_with_a_tail_group_4_nodes_then_the_restart_then_alone_then_shared_then_the_tail() -> None:
    items = [Item("last", "lab_last"), Item("a"), Item("four", "four_nodes"), Item("b", "lab_shared"), Item("c")]
    items[3:3] = [Item("w", "lab_shared", "lab_waits", group="lab-tail.test_w"), Item("local", group="local")]
    items.sort(key=lab_order)  # type: ignore[arg-type]
    assert [i.name for i in items] == ["four", "last", "a", "local", "c", "b", "w"]


def test_without_a_tail_group_the_shared_tests_come_before_4_nodes_so_the_lab_never_switches_back() -> None:
    items = [Item("last", "lab_last"), Item("a"), Item("four", "four_nodes"), Item("b", "lab_shared"), Item("c")]
    items.sort(key=lab_order_alone)  # type: ignore[arg-type]
    assert [i.name for i in items] == ["a", "c", "b", "four", "last"]


def test_the_tail_holds_shared_tests_that_wait_or_are_of_its_modules_never_one_that_must_be_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(STREAMS_ENV, raising=False)
    tail_module = sorted(TAIL_MODULES)[0]
    waits, tail = Item("w", "lab_shared", "lab_waits"), Item("t", "lab_shared", module=tail_module)
    assert stream(waits) == "lab-tail.test_x"  # type: ignore[arg-type]
    assert stream(tail) == f"lab-tail.{tail_module.removesuffix('.py')}"  # type: ignore[arg-type]
    assert all(in_tail(stream(i)) for i in (waits, tail))  # type: ignore[arg-type]
    assert stream(Item("alone", "lab_waits")) == "lab"  # type: ignore[arg-type]
    assert stream(Item("alone", module=tail_module)) == "lab"  # type: ignore[arg-type]
    assert stream(Item("shared", "lab_shared")) == "lab"  # type: ignore[arg-type]
    assert not in_tail("lab") and not in_tail("local") and not in_tail("lab-tailx")


def test_the_tail_is_one_group_per_module_so_both_workers_share_it_but_one_stream_with_two_lab_streams(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pytest-xdist hands a group whole to one worker: as one group, the tail went to whichever
    worker asked first and the other sat idle to the end (ci92, ~570 s)."""
    monkeypatch.delenv(STREAMS_ENV, raising=False)
    modules = sorted(TAIL_MODULES)[:2]
    groups = {stream(Item(m, "lab_shared", module=m)) for m in modules}  # type: ignore[arg-type]
    assert len(groups) == 2 and all(map(in_tail, groups))
    monkeypatch.setenv(STREAMS_ENV, "2")
    assert {stream(Item(m, "lab_shared", module=m)) for m in modules} == {"lab-tail"}  # type: ignore[arg-type]
    assert in_tail("lab-tail")


def test_a_shared_tests_job_may_not_oversubscribe_an_exclusive_ones_may() -> None:
    """SLURM starts an --oversubscribe job only on nodes whose jobs all allow sharing: beside the
    other stream's jobs it waits (tests/lab/sharing.py), so a shared test's command is refused."""
    try:
        note_running(Item("alone"))  # type: ignore[arg-type]
        refuse_oversubscribe(("submit", "spec.json", "x.py", "--oversubscribe"))
        note_running(Item("shared", "lab_shared"))  # type: ignore[arg-type]
        refuse_oversubscribe(("submit", "spec.json", "x.py", "--nodes", "3"))
        with pytest.raises(pytest.fail.Exception, match="--cpus-per-node"):
            refuse_oversubscribe(("submit", "spec.json", "x.py", "--oversubscribe"))
    finally:
        note_running(None)
    refuse_oversubscribe(("submit", "spec.json", "x.py", "--oversubscribe"))


def test_a_wait_for_the_lab_lock_is_bounded_and_names_the_holder(tmp_path: Path) -> None:
    holder, waiter = LabLock(tmp_path), LabLock(tmp_path, wait_s=0.5)
    holder.take(exclusive=True, test="tests/lab/test_x.py::test_alone")
    started = time.monotonic()
    with pytest.raises(
        TimeoutError, match=r"test_y waited 0 s .*held by .*tests/lab/test_x.py::test_alone \(exclusive, for \d+ s\)"
    ):
        waiter.take(exclusive=False, test="test_y")
    assert time.monotonic() - started < 5
    holder.release()
    waiter.take(exclusive=False, test="test_y")  # free again: taken at once, the turnstile not left held
    assert waiter.held == "shared"
    assert "test_y (shared" in LabLock(tmp_path).holders()
