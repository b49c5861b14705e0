"""The one ``key=value`` parser (thinkj.overrides) and the commands that read their items through it.

Broken on purpose once each: with the "given twice" check removed from ``parse_key_values``, the duplicate cases
below failed (the last value won silently); with ``yaml_scalar`` reading ``no`` as YAML 1.1 does, the LlamaFactory
typing case failed (``save_strategy`` became False).
"""

from __future__ import annotations

import pytest

from thinkj.errors import ThinkJError
from thinkj.overrides import as_text, json_or_text, parse_key_values, yaml_scalar, yaml_value


def test_items_are_split_at_the_first_equals_and_typed_by_the_caller():
    assert parse_key_values(["method=online (GRPO)", "note=a=b"], "--tag") == {"method": "online (GRPO)",
                                                                               "note": "a=b"}
    assert parse_key_values(["tensor_parallel_size=4", "base_url=http://h:1/v1", "x=[1, 2]"], "--backend-arg",
                            json_or_text) == {"tensor_parallel_size": 4, "base_url": "http://h:1/v1", "x": [1, 2]}
    assert parse_key_values(["learning_rate=1e-6", "max_steps=3", "save_strategy=no", "bf16=false", "dataset=a,b",
                             "x="], "overrides", yaml_scalar) == {
        "learning_rate": 1e-6, "max_steps": 3, "save_strategy": "no", "bf16": False, "dataset": "a,b", "x": ""}
    assert parse_key_values(["w_str=[0.5, 0.2]", "m={a: 1}"], "--set", yaml_value) == {"w_str": [0.5, 0.2],
                                                                                      "m": {"a": 1}}
    assert parse_key_values(None, "--set") == {} and parse_key_values([" k =v"], "--tag", as_text) == {"k": "v"}


@pytest.mark.parametrize("items, message", [
    (["w_str"], r"^--set 'w_str': expected key=value, e\.g\. --set w_str=0\.5$"),
    (["=0.5"], r"^--set '=0\.5': expected key=value"),
    (["w_str=0.5", "w_fmt=1", "w_str=0.2"], r"^--set w_str: given twice \(w_str='0\.2' after an earlier"),
    ([" w_str=0.5", "w_str =0.2"], r"^--set w_str: given twice"),
])
def test_malformed_or_repeated_items_are_one_line_naming_the_flag(items, message):
    with pytest.raises(ThinkJError, match=message):
        parse_key_values(items, "--set", yaml_value, example="e.g. --set w_str=0.5")


def test_a_typer_error_names_the_item_and_the_class_is_the_callers():
    from thinkj.models.profiles import ConfigError

    def whole(key: str, value: str, origin: str) -> int:
        return int(value)

    with pytest.raises(ConfigError, match=r"^SFT_OVERRIDES max_steps='x': invalid literal"):
        parse_key_values(["max_steps=x"], "SFT_OVERRIDES", whole, error=ConfigError)
    with pytest.raises(ThinkJError, match=r"^--set 'w_str=\[\[': the value is (line 1: )?not valid YAML"):
        parse_key_values(["w_str=[["], "--set", yaml_value)


def test_every_caller_refuses_a_key_given_twice():
    from thinkj.offline.cli import _backend_kwargs
    from thinkj.sweep.sweep_file import parse_overrides as sweep_sets
    from thinkj.train.config import ConfigError, parse_overrides

    with pytest.raises(ConfigError, match="override max_steps: given twice"):
        parse_overrides(["max_steps=3", "max_steps=4"])
    with pytest.raises(ThinkJError, match="--backend-arg tensor_parallel_size: given twice"):
        _backend_kwargs(["tensor_parallel_size=2", "tensor_parallel_size=4"])
    with pytest.raises(ThinkJError, match="--set w_str: given twice"):
        sweep_sets(["w_str=[0.5]", "w_str=[0.2]"])
    assert _backend_kwargs(["tensor_parallel_size=8", "enforce_eager=true"]) == {"tensor_parallel_size": 8,
                                                                                "enforce_eager": True}


@pytest.mark.parametrize("option, items, message", [
    ("--tag", ["model=a", "model=b"], "--tag model: given twice"),
    ("--tag", ["model"], "--tag 'model': expected key=value"),
    ("--backend-arg", ["batch_size=2", "batch_size=4"], "--backend-arg batch_size: given twice"),
])
def test_eval_run_refuses_bad_items_before_any_model_loads(option, items, message, tmp_path):
    from typer.testing import CliRunner

    from thinkj.evaluation.cli import app

    args = ["run", "synthetic", "--model", str(tmp_path / "no-model"), "--out", str(tmp_path / "out")]
    for item in items:
        args += [option, item]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ThinkJError) and message in str(result.exception), result.output
    assert not (tmp_path / "out").exists()
