"""The worker class of bench/worker_group.py, in a module of its own so that both sides (raw
actors and the worker group) import exactly the same, light module in their processes."""


class Bare:
    def noop(self) -> None:
        return None

    def size_of(self, batch: object) -> int:
        return batch.size  # type: ignore[attr-defined]
