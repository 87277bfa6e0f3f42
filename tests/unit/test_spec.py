"""The cluster spec: 20+ malformed specs each give exit 2 and one line naming field and fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_rl.config.spec import default_local_spec, load_spec, parse_spec
from slurm_rl.core.errors import SpecError
from slurm_rl.login.cli import cli

GOOD = {"cluster_name": "c1", "fileroot": "/shared/srl"}

# (overrides on top of GOOD, or a full replacement when a list/str, field named in the error)
BAD_SPECS: list[tuple[str, object, str]] = [
    ("unknown key", {**GOOD, "filerot": "/x"}, "filerot"),
    ("unknown key suggests", {**GOOD, "gpus_per_nod": 1}, "gpus_per_node"),
    ("missing cluster_name", {"fileroot": "/x"}, "cluster_name"),
    ("missing fileroot", {"cluster_name": "c"}, "fileroot"),
    ("relative fileroot", {**GOOD, "fileroot": "shared/srl"}, "fileroot"),
    ("empty fileroot", {**GOOD, "fileroot": ""}, "fileroot"),
    ("fileroot not a string", {**GOOD, "fileroot": 5}, "fileroot"),
    ("bad cluster_type", {**GOOD, "cluster_type": "k8s"}, "cluster_type"),
    ("ray without address", {**GOOD, "cluster_type": "ray"}, "ray_head_node_address"),
    ("address without ray", {**GOOD, "ray_head_node_address": "h:6379"}, "cluster_type"),
    ("ray address no port", {**GOOD, "cluster_type": "ray", "ray_head_node_address": "head"}, "ray_head_node_address"),
    ("bad cluster_name", {**GOOD, "cluster_name": "my cluster!"}, "cluster_name"),
    ("gpus_per_node string", {**GOOD, "gpus_per_node": "8"}, "gpus_per_node"),
    ("gpus_per_node negative", {**GOOD, "gpus_per_node": -1}, "gpus_per_node"),
    ("gpus_per_node float", {**GOOD, "gpus_per_node": 1.5}, "gpus_per_node"),
    ("cpus_per_node zero", {**GOOD, "cpus_per_node": 0}, "cpus_per_node"),
    ("bad container_runtime", {**GOOD, "container_runtime": "docker"}, "container_runtime"),
    ("pyxis without cpu_image", {**GOOD, "container_runtime": "pyxis", "python": "python3"}, "cpu_image"),
    # the default python is the submitter's path, which the image does not have
    ("pyxis without python", {**GOOD, "container_runtime": "pyxis", "cpu_image": "i"}, "python"),
    ("node_local_dir relative", {**GOOD, "node_local_dir": "scratch"}, "node_local_dir"),
    ("node_local_dir too long for Ray's sockets", {**GOOD, "node_local_dir": "/" + "d" * 40}, "node_local_dir"),
    (
        "apptainer gpu without gpu_image",
        {**GOOD, "container_runtime": "apptainer", "cpu_image": "c.sif", "gpus_per_node": 4, "python": "python3"},
        "gpu_image",
    ),
    ("bad node type regex", {**GOOD, "node_type_from_node_name": {"gpu[": "gpu"}}, "node_type_from_node_name"),
    ("bad gpu type regex", {**GOOD, "gpu_type_from_node_name": {"(h100": "h100"}}, "gpu_type_from_node_name"),
    ("node types not an object", {**GOOD, "node_type_from_node_name": ["gpu"]}, "node_type_from_node_name"),
    ("node type value not a string", {**GOOD, "node_type_from_node_name": {"gpu": 1}}, "node_type_from_node_name"),
    ("bad mount", {**GOOD, "default_mount": "/a:/b,relative:/c"}, "default_mount"),
    ("mount without dst", {**GOOD, "default_mount": "/only"}, "default_mount"),
    ("setup not a list", {**GOOD, "setup": "module load x"}, "setup"),
    ("setup item not a string", {**GOOD, "setup": ["ok", 3]}, "setup"),
    ("env not an object", {**GOOD, "env": ["A=1"]}, "env"),
    ("env bad name", {**GOOD, "env": {"1BAD": "x"}}, "env"),
    ("env value not a string", {**GOOD, "env": {"A": 1}}, "env"),
    ("empty python", {**GOOD, "python": " "}, "python"),
    ("bad node_name_prefix", {**GOOD, "node_name_prefix": "no de"}, "node_name_prefix"),
    ("partition not a string", {**GOOD, "partition": 3}, "partition"),
    ("top level not an object", [1, 2], "JSON object"),
]


@pytest.mark.parametrize(("label", "data", "field"), BAD_SPECS, ids=[b[0] for b in BAD_SPECS])
def test_bad_spec_exit_2_one_line_naming_field(tmp_path: Path, label: str, data: object, field: str) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(data))
    res = CliRunner().invoke(cli, ["spec", "validate", str(path)])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("slurm-rl: error: ")
    assert field in lines[0]
    assert res.stdout == ""


def test_error_names_value_and_fix() -> None:
    with pytest.raises(SpecError) as exc:
        parse_spec({**GOOD, "fileroot": "rel/dir"})
    msg = str(exc.value)
    assert "'rel/dir'" in msg and "absolute path" in msg


def test_invalid_json_names_line(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"cluster_name": "c",\n "fileroot": }')
    res = CliRunner().invoke(cli, ["spec", "validate", str(path)])
    assert res.exit_code == 2
    assert "line 2" in res.stderr and "invalid JSON" in res.stderr


def test_missing_spec_file() -> None:
    res = CliRunner().invoke(cli, ["spec", "validate", "/nonexistent/spec.json"])
    assert res.exit_code == 2
    assert "does not exist" in res.stderr and "CLUSTER_SPEC_PATH" in res.stderr


def test_node_name_matching_no_type(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({**GOOD, "node_type_from_node_name": {r"gpu\d+": "gpu", r"cpu\d+": "cpu"}}))
    ok = CliRunner().invoke(cli, ["spec", "validate", str(path), "--nodelist", "gpu[01-02],cpu7"])
    assert ok.exit_code == 0, ok.output
    bad = CliRunner().invoke(cli, ["spec", "validate", str(path), "--nodelist", "gpu01,login3"])
    assert bad.exit_code == 2
    assert "login3" in bad.stderr and "node_type_from_node_name" in bad.stderr


def test_defaults_and_types() -> None:
    s = parse_spec({**GOOD, "fileroot": "/shared//srl/"})
    assert s.fileroot == "/shared/srl"
    assert s.node_name_prefix is None
    assert s.container_runtime == "none" and s.cluster_type == "slurm"
    assert s.gpus_per_node == 0 and s.cpus_per_node is None and s.python is None
    assert s.setup == [] and s.env == {}


def test_node_and_gpu_types() -> None:
    s = parse_spec(
        {
            **GOOD,
            "node_type_from_node_name": {r"gpu\d+": "gpu", r"cpu\d+": "cpu"},
            "gpu_type_from_node_name": {r"gpu0[0-4]": "a100", r"gpu\d+": "h100"},
        }
    )
    assert s.node_type("gpu03") == "gpu" and s.node_type("cpu1") == "cpu" and s.node_type("x") is None
    assert s.gpu_type_of("gpu03") == "a100" and s.gpu_type_of("gpu17") == "h100"


def test_node_type_regexes_match_whole_names_everywhere(tmp_path: Path) -> None:
    """`spec validate --nodelist` and the job's Ray resources use one full match: a name that
    only starts like a pattern is refused up front instead of getting no node_type resource."""
    from slurm_rl.core.manifest import JobManifest

    s = parse_spec({**GOOD, "node_type_from_node_name": {r"gpu\d": "gpu"}})
    assert s.node_type("gpu1") == "gpu" and s.node_type("gpu10") is None
    manifest = JobManifest(slurm_rl_version="0", cluster_name="c1", node_type_from_node_name={r"gpu\d": "gpu"})
    assert manifest.type_resources("gpu1", 0) == {"node_type:gpu": 1} and manifest.type_resources("gpu10", 0) == {}
    path = tmp_path / "s.json"
    path.write_text(json.dumps({**GOOD, "node_type_from_node_name": {r"gpu\d": "gpu"}}))
    bad = CliRunner().invoke(cli, ["spec", "validate", str(path), "--nodelist", "gpu[1,10]"])
    assert bad.exit_code == 2 and "'gpu10'" in bad.stderr


def test_node_name_prefix_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({**GOOD, "node_name_prefix": "gpu"}))
    assert CliRunner().invoke(cli, ["spec", "validate", str(path), "--nodelist", "gpu[01-02]"]).exit_code == 0
    bad = CliRunner().invoke(cli, ["spec", "validate", str(path), "--nodelist", "gpu01,node7"])
    assert bad.exit_code == 2 and "node_name_prefix" in bad.stderr and "'node7'" in bad.stderr


def test_spec_path_precedence(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({**GOOD, "cluster_name": "from-flag"}))
    b.write_text(json.dumps({**GOOD, "cluster_name": "from-env"}))
    assert load_spec(str(a), {"CLUSTER_SPEC_PATH": str(b)}).cluster_name == "from-flag"
    assert load_spec(None, {"CLUSTER_SPEC_PATH": str(b)}).cluster_name == "from-env"
    local = load_spec(None, {})
    assert local == default_local_spec()
    assert local.cluster_type == "local" and local.fileroot.endswith(".cache/slurm_rl")


def test_spec_show_fills_defaults(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(GOOD))
    res = CliRunner().invoke(cli, ["spec", "show", str(path)])
    assert res.exit_code == 0
    shown = json.loads(res.stdout)
    assert shown["node_name_prefix"] is None and shown["container_runtime"] == "none"


def test_shipped_specs_are_valid() -> None:
    root = Path(__file__).resolve().parents[2] / "cluster_specs"
    specs = sorted(root.glob("*.json"))
    assert len(specs) >= 2
    for p in specs:
        res = CliRunner().invoke(cli, ["spec", "validate", str(p)])
        assert res.exit_code == 0, (p, res.output)
