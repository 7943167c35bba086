"""Every method key is documented, and ``prunebench methods NAME`` and methods/README.md show it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest
from helpers import ROOT

from benchmark.cli import main
from benchmark.cli.method_docs import field_meanings, markdown_table, method_keys, undocumented
from benchmark.training.validation import load_config
from methods import METHODS, load_methods

load_methods()
BUILTIN = [n for n in METHODS.names() if METHODS.get(n).__module__.startswith("methods.")]


@pytest.mark.parametrize("name", METHODS.names())
def test_every_key_of_every_registered_method_has_a_meaning(name: str) -> None:
    params = METHODS.get(name).Params
    assert undocumented(params) == [], (
        f"method {name!r}: document these fields in the 'Attributes:' section of "
        f"{params.__qualname__}'s docstring (or field(metadata={{'help': ...}}))"
    )


def test_methods_gmp_lists_every_key_with_type_default_meaning_and_the_presets(capsys) -> None:
    assert main(["methods", "gmp"]) == 0
    out = capsys.readouterr().out
    cls = METHODS.get("gmp")
    meanings = field_meanings(cls.Params)
    lines = out.split("presets")[0].splitlines()
    for f in dataclasses.fields(cls.Params):
        (line,) = [line for line in lines if line.split()[:1] == [f.name]]
        assert meanings[f.name] in line, line
        assert repr(f.default).strip("'") in line, line
    assert any(line.split()[:2] == ["sparsity", "float"] for line in lines)
    assert "steps" in out and "0: use interval" in out  # what steps = 0 means
    for preset, axes in cls.presets.items():
        assert f"  {preset}:" in out
        for key in axes:
            assert f"    {key} = [" in out


def test_methods_imp_shows_the_optional_parent_weight_decay(capsys) -> None:
    assert main(["methods", "imp"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "parent_weight_decay" in x]
    assert "float or unset" in line and "unset" in line.split("float or unset")[1]


def test_print_config_names_unset_optional_keys(capsys) -> None:
    assert main(["run", "--print-config", "--set", "method.name=imp"]) == 0
    out = capsys.readouterr().out
    assert "# parent_weight_decay = " in out
    assert "prunebench methods imp" in out


def test_a_method_ignoring_the_goal_sparsity_says_so() -> None:
    (sparsity,) = [k for k in method_keys(METHODS.get("cs")) if k.key == "sparsity"]
    assert "ignored" in sparsity.meaning
    (sparsity,) = [k for k in method_keys(METHODS.get("gmp")) if k.key == "sparsity"]
    assert "ignored" not in sparsity.meaning


def test_meanings_from_docstrings_bases_and_metadata() -> None:
    @dataclass
    class Base:
        """A base.

        Attributes:
            a: the first key,
                continued on the next line
        """

        a: int = 0

    @dataclass
    class Child(Base):
        """A child without an Attributes section for its field's base."""

        b: float = field(default=1.0, metadata={"help": "the second key"})
        c: str = "x"

    assert field_meanings(Child) == {
        "a": "the first key, continued on the next line",
        "b": "the second key",
    }
    assert undocumented(Child) == ["c"]


def test_the_method_list_of_the_methods_page_is_generated_from_the_params() -> None:
    listing = markdown_table(BUILTIN)
    assert "`gsm`: global sparse momentum" in listing and '`schedule` ("ALLR")' in listing
    assert max(len(line) for line in listing.splitlines()) <= 100
    assert listing in (ROOT / "methods" / "README.md").read_text(), (
        "the method list of methods/README.md is stale: paste `prunebench methods --markdown`"
    )


def test_unknown_method_name_is_a_config_error(capsys) -> None:
    assert main(["methods", "no-such-method"]) == 2
    assert "method.name = 'no-such-method'" in capsys.readouterr().err


def test_configs_still_load_for_every_documented_method() -> None:
    # the docstrings are documentation only: every method's default config stays valid
    for name in BUILTIN:
        # On the method's own tiny problem where it names one (the language-model methods).
        load_config(None, [f"method.name={name}", *METHODS.get(name).contract_settings])
