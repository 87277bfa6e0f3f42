"""Which address a node gives Ray on a multi-NIC node (spec field network_interface), and the
clear failures when it has none. The lab's fabric test runs the same code on real interfaces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_rl.config.spec import load_spec
from slurm_rl.core.errors import SpecError
from slurm_rl.job.network import AddressProblem, NodeAddress, choose_address, socket_ifname_env
from tests.conftest import run_cli

NODE = {"lo": ["127.0.0.1"], "eth0": ["10.77.0.12"], "fab0": ["10.78.0.12"], "ib1": []}


def hosts(table: dict[str, str]):
    def resolve(name: str) -> str:
        if name not in table:
            raise OSError("Name or service not known")
        return table[name]

    return resolve


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("fab0", NodeAddress("10.78.0.12", "fab0")),
        ("10.78.0.0/16", NodeAddress("10.78.0.12", "fab0")),
        ("10.77.0.12/32", NodeAddress("10.77.0.12", "eth0")),
        ("", NodeAddress("10.77.0.12", None)),  # the name's address
    ],
)
def test_the_chosen_address(choice: str, expected: NodeAddress) -> None:
    assert choose_address("node2", choice, NODE, resolve=hosts({"node2": "10.77.0.12"})) == expected


@pytest.mark.parametrize(
    ("choice", "table", "message"),
    [
        ("ib0", {}, "no interface ib0 on this node (spec field network_interface; its interfaces: eth0 10.77.0.12"),
        ("ib1", {}, "no IPv4 address on ib1 on this node (spec field network_interface"),
        ("10.99.0.0/16", {}, "no address in 10.99.0.0/16 on this node (spec field network_interface"),
        ("", {"node2": "10.77.0.99"}, "its name node2 resolves to 10.77.0.99, which is not an address of this node"),
        ("", {"node2": "127.0.1.1"}, "its name node2 resolves to 127.0.1.1, which is not an address of this node"),
        ("", {}, "cannot resolve node name 'node2'"),
    ],
)
def test_a_node_without_the_address_fails_named(choice: str, table: dict, message: str) -> None:
    with pytest.raises(AddressProblem) as exc:
        choose_address("node2", choice, NODE, resolve=hosts(table))
    assert str(exc.value).startswith(message), exc.value
    if table.get("node2", "").startswith("10."):
        assert "set the spec field network_interface" in str(exc.value)


def test_a_one_node_job_may_use_a_loopback_name() -> None:
    """Debian's /etc/hosts maps the host name to 127.0.1.1; alone, a node reaches itself there."""
    got = choose_address("laptop", "", NODE, resolve=hosts({"laptop": "127.0.1.1"}), nodes=1)
    assert got == NodeAddress("127.0.1.1", None)


def test_nccl_and_gloo_follow_the_chosen_interface_unless_the_user_set_them() -> None:
    fab = NodeAddress("10.78.0.12", "fab0")
    assert socket_ifname_env(fab, {}) == {"NCCL_SOCKET_IFNAME": "fab0", "GLOO_SOCKET_IFNAME": "fab0"}
    assert socket_ifname_env(fab, {"NCCL_SOCKET_IFNAME": "=ib0"}) == {"GLOO_SOCKET_IFNAME": "fab0"}
    assert socket_ifname_env(NodeAddress("10.77.0.12", None), {}) == {}


@pytest.mark.parametrize("value", ["ib0", "10.78.0.0/16", "bond0.100", "fd00::/64"])
def test_spec_accepts_interface_names_and_networks(tmp_path: Path, value: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"cluster_name": "c", "fileroot": str(tmp_path), "network_interface": value}))
    assert load_spec(path).network_interface == value


@pytest.mark.parametrize("value", ["10.78.0.0/99", "ib 0", "an-interface-name-too-long"])
def test_spec_refuses_what_is_neither_in_one_line(tmp_path: Path, value: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"cluster_name": "c", "fileroot": str(tmp_path), "network_interface": value}))
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    assert "network_interface" in str(exc.value) and "\n" not in str(exc.value)
    res = run_cli("submit", str(path), str(path), "--nodes", "2", "--dry-run")
    assert res.returncode == 2 and "network_interface" in res.stderr and len(res.stderr.strip().splitlines()) == 1
