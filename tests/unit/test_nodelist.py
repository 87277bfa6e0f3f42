import pytest

from slurm_rl.core.errors import UsageError
from slurm_rl.core.nodelist import expand_hostlist

CASES = [
    ("", []),
    ("node1", ["node1"]),
    ("node[1-3]", ["node1", "node2", "node3"]),
    ("NODE[01-02,05]", ["NODE01", "NODE02", "NODE05"]),
    ("gpu[008-011]", ["gpu008", "gpu009", "gpu010", "gpu011"]),
    ("a[1-2],b[3,5]", ["a1", "a2", "b3", "b5"]),
    ("cpu1,gpu[1-2],NODE[07]", ["cpu1", "gpu1", "gpu2", "NODE07"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("node[9-11]", ["node9", "node10", "node11"]),
    ("node[09-11]", ["node09", "node10", "node11"]),
    ("x-1[0-1]-y", ["x-10-y", "x-11-y"]),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_expand(text: str, expected: list[str]) -> None:
    assert expand_hostlist(text) == expected


@pytest.mark.parametrize("bad", ["node[1-", "node1-2]", "node[a-b]", "node[3-1]", "node[[1]]", "node[1,,2]"])
def test_bad_hostlists_raise_usage_error(bad: str) -> None:
    with pytest.raises(UsageError, match="host list"):
        expand_hostlist(bad)
