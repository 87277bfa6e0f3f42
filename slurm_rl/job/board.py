"""How a job's nodes tell each other things while Ray runs: keys in the head's GCS key-value
store (namespace ``slurm_rl``), never files on the shared filesystem.

A site's job dir is on Lustre/NFS, where every stat is a metadata-server round trip; a node that
polled a stop file there 20 times a second would cost a 1,000-node job 20,000 metadata operations
a second. The GCS is already the job's rendezvous (it answers the join), answers a read in
~0.2 ms, and goes away with the job. The job dir keeps what must outlive the job (logs,
events, exit files, the per-attempt markers written once), and the stop flag there stays the
fallback a node reads once, when the head's GCS no longer answers.

Keys, per attempt: ``<attempt>/head`` (the head's Ray is up: the others join only then),
``<attempt>/up/<rank>`` (a node joined), ``<attempt>/failed/<rank>`` (a node failed, the value
says why) and ``<attempt>/stop`` (node 0 is done; the value is the reason).
"""

from __future__ import annotations

from ..core.errors import SlurmRlError

NAMESPACE = b"slurm_rl"
TIMEOUT_S = 1.0


class BoardUnreachable(SlurmRlError):
    """The head's GCS did not answer."""


class Board:
    """The job's key-value board in the GCS at ``address``, for one attempt."""

    def __init__(self, address: str, attempt: int) -> None:
        """Built once the GCS has answered (a GCS that is not there blocks this for ~40 s)."""
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        self.address = address
        self.attempt = attempt
        try:
            self._client = GcsClient(address=address)
        except Exception as exc:  # noqa: BLE001
            raise BoardUnreachable(f"no GCS at {address}: {exc}") from None

    def _key(self, kind: str, rank: int | None = None) -> bytes:
        return f"{self.attempt}/{kind}".encode() + (f"/{rank}".encode() if rank is not None else b"")

    def put(self, kind: str, value: str, rank: int | None = None) -> bool:
        """Best effort: False when the GCS does not answer (the caller has a file fallback)."""
        try:
            self._client.internal_kv_put(self._key(kind, rank), value.encode(), True, NAMESPACE, timeout=TIMEOUT_S)
        except Exception:  # noqa: BLE001 - grpc errors of every kind mean the same here
            return False
        return True

    def get(self, kind: str) -> str | None:
        try:
            value = self._client.internal_kv_get(self._key(kind), NAMESPACE, timeout=TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001
            raise BoardUnreachable(str(exc)) from None
        return value.decode() if value is not None else None

    def by_rank(self, kind: str) -> dict[int, str]:
        """Every ``<attempt>/<kind>/<rank>`` key: {rank: value}."""
        prefix = self._key(kind) + b"/"
        try:
            keys = self._client.internal_kv_keys(prefix, NAMESPACE, timeout=TIMEOUT_S)
            values = self._client.internal_kv_multi_get(keys, NAMESPACE, timeout=TIMEOUT_S) if keys else {}
        except Exception as exc:  # noqa: BLE001
            raise BoardUnreachable(str(exc)) from None
        return {int(k[len(prefix) :]): v.decode() for k, v in values.items()}
