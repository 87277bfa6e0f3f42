"""NeMo RL 2026's worker_group_utils: merging worker options and environments, Nsight configs."""

from __future__ import annotations

import copy

import pytest

from slurm_rl.distributed.worker_group_utils import (
    get_nsight_config_if_pattern_matches,
    merge_env_vars_with_process_env,
    recursive_merge_options,
)


def test_merge_is_deep_for_dicts_whole_for_everything_else_and_changes_neither_input() -> None:
    default = {"a": 1, "n": {"x": 1, "deep": {"y": 2}}, "lst": [1, 2], "s": {"k": 1}, "d": "scalar"}
    extra = {"n": {"deep": {"z": 3}, "x": 10}, "lst": [3], "s": "replaced", "d": {"now": "dict"}, "new": True}
    before = copy.deepcopy((default, extra))
    merged = recursive_merge_options(default, extra)
    assert merged == {
        "a": 1,
        "n": {"x": 10, "deep": {"y": 2, "z": 3}},
        "lst": [3],
        "s": "replaced",
        "d": {"now": "dict"},
        "new": True,
    }
    assert (default, extra) == before
    merged["n"]["deep"]["y"] = 0
    assert default["n"]["deep"]["y"] == 2  # a copy, not shared structure


def test_top_level_runtime_env_nsight_is_renamed_before_the_merge() -> None:
    default = {"runtime_env": {"_nsight": {"o": "default"}, "env_vars": {"A": "1"}}}
    merged = recursive_merge_options(default, {"runtime_env": {"nsight": {"o": "mine"}, "env_vars": {"B": "2"}}})
    assert merged == {"runtime_env": {"nsight": {"o": "mine"}, "env_vars": {"A": "1", "B": "2"}}}
    both = {"runtime_env": {"_nsight": {"p": 1}, "nsight": {"o": "x"}}}
    assert recursive_merge_options(both, {}) == both  # nsight already there: left alone
    nested = {"worker": {"runtime_env": {"_nsight": {"p": 1}}}}
    assert recursive_merge_options(nested, {}) == nested  # only the top level's


def test_env_vars_over_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRL_LAUNCHER", "launcher")
    monkeypatch.setenv("SRL_BOTH", "launcher")
    declared = {"SRL_BOTH": "declared"}
    merged = merge_env_vars_with_process_env(declared)
    assert merged["SRL_LAUNCHER"] == "launcher" and merged["SRL_BOTH"] == "declared"
    assert declared == {"SRL_BOTH": "declared"}


def test_nsight_config_for_matching_workers_only(monkeypatch: pytest.MonkeyPatch) -> None:
    assert get_nsight_config_if_pattern_matches("policy-0") == {}
    monkeypatch.setenv("NRL_NSYS_WORKER_PATTERNS", "policy*, gen-?")
    monkeypatch.setenv("NRL_NSYS_PROFILE_STEP_RANGE", "3:5")
    monkeypatch.setenv("NRL_NSYS_EXTRA_OPTIONS", '{"cuda-memory-usage": "true", "s": "cpu"}')
    config = get_nsight_config_if_pattern_matches("policy-0")["nsight"]
    assert config["capture-range"] == "cudaProfilerApi" and config["o"] == "'policy-0_3:5_%p'"
    assert config["cuda-memory-usage"] == "true" and config["s"] == "cpu"  # extra options override
    assert get_nsight_config_if_pattern_matches("gen-1") and not get_nsight_config_if_pattern_matches("ref-0")
    monkeypatch.delenv("NRL_NSYS_PROFILE_STEP_RANGE")
    with pytest.raises(ValueError, match="NRL_NSYS_PROFILE_STEP_RANGE"):
        get_nsight_config_if_pattern_matches("policy-0")


def test_nsight_settings_are_module_values_as_in_nemo_rl(monkeypatch: pytest.MonkeyPatch) -> None:
    """NeMo RL reads the NRL_NSYS_* variables at import; code (and NeMo RL's tests) may set the
    module's values. A profiled worker gets NeMo RL's default flags, then the extra options."""
    from slurm_rl.distributed import worker_group_utils as wgu
    from slurm_rl.utils.nsys import _parse_extra_options

    monkeypatch.setattr(wgu, "NRL_NSYS_WORKER_PATTERNS", " *policy* ,, exact ")
    monkeypatch.setattr(wgu, "NRL_NSYS_PROFILE_STEP_RANGE", "2:3")
    monkeypatch.setattr(wgu, "NRL_NSYS_EXTRA_OPTIONS", {"capture-range": "none"})
    config = get_nsight_config_if_pattern_matches("megatron_policy_worker")["nsight"]
    assert config["o"] == "'megatron_policy_worker_2:3_%p'" and config["capture-range"] == "none"
    assert config["cuda-graph-trace"] == "node" and get_nsight_config_if_pattern_matches("exact")
    assert get_nsight_config_if_pattern_matches("critic") == {}
    assert _parse_extra_options(" ") == {}
    with pytest.raises(ValueError, match="Failed to parse NRL_NSYS_EXTRA_OPTIONS"):
        _parse_extra_options("not-json")
    with pytest.raises(ValueError, match="must be a JSON object"):
        _parse_extra_options('["a"]')
