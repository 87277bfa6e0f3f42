"""The worker class of bench/worker_group.py, in a module of its own so that both sides (raw
actors and the worker group) import exactly the same, light module in their processes."""


class Bare:
    def noop(self) -> None:
        return None

    def size_of(self, batch: object) -> int:
        return batch.size  # type: ignore[attr-defined]

    def consume(self, data: object, cfg: object = None) -> int:
        return data.size  # type: ignore[attr-defined]


class BareUv(Bare):
    """The same worker under another name, registered with a uv environment by bench/uv_env.py."""
