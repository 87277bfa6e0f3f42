"""The lab lock of the two lab-test streams (tests/lab/sharing.py): shared tests run together, an
exclusive one runs alone, and a waiting exclusive one goes before a shared one that comes later;
the order of the lab tests (tests/conftest.py)."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.conftest import lab_order
from tests.lab.sharing import LabLock, stream


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
    """What the ordering reads of a collected test: its marks."""

    def __init__(self, name: str, *marks: str) -> None:
        self.name, self.marks = name, marks

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


def test_alone_then_shared_then_those_that_wait_then_4_nodes_and_the_lab_restarts_last() -> None:
    items = [Item("last", "lab_last"), Item("a"), Item("four", "four_nodes"), Item("b", "lab_shared"), Item("c")]
    items[3:3] = [Item("w", "lab_shared", "lab_waits")]
    items.sort(key=lab_order)  # type: ignore[arg-type]
    assert [i.name for i in items] == ["a", "c", "b", "w", "four", "last"]


def test_the_shared_tests_that_wait_are_a_group_of_their_own_a_test_that_must_be_alone_never() -> None:
    waits = Item("w", "lab_shared", "lab_waits")
    assert stream(waits) == "lab-b"  # type: ignore[arg-type]
    assert stream(Item("alone", "lab_waits")) == "lab"  # type: ignore[arg-type]
    assert stream(Item("shared", "lab_shared")) == "lab"  # type: ignore[arg-type]
