"""``ray_harness.vended_interventions``: Strands' import paths, and CedarAuthorization reported as not provided."""

from __future__ import annotations

import importlib

import pytest

import ray_harness.vended_interventions as vended
from ray_harness.vended_interventions import hitl
from ray_harness.vended_interventions.hitl import classifier, hitl as hitl_module


@pytest.mark.parametrize(("module", "names", "holder"), [
    ("ray_harness.vended_interventions", ["HumanInTheLoop"], hitl_module),
    ("ray_harness.vended_interventions.hitl", ["HumanInTheLoop"], hitl_module),
    ("ray_harness.vended_interventions.hitl", ["HumanInTheLoopClassifier", "LLMClassifierConfig"], classifier),
    ("ray_harness.vended_interventions.hitl.hitl", ["HumanInTheLoop"], hitl_module),
    ("ray_harness.vended_interventions.hitl.classifier",
     ["ClassifierResult", "HumanInTheLoopClassifier", "LLMClassifierConfig"], classifier),
])
def test_strands_import_paths_give_the_same_objects(module: str, names: list[str], holder: object) -> None:
    imported = importlib.import_module(module)
    for name in names:
        assert getattr(imported, name) is getattr(holder, name)


def test_the_handler_keeps_strands_name() -> None:
    assert hitl.HumanInTheLoop.name == "strands:human-in-the-loop"


def test_cedar_authorization_is_reported_as_not_provided() -> None:
    with pytest.raises(ImportError, match="does not provide Strands' CedarAuthorization"):
        from ray_harness.vended_interventions import CedarAuthorization  # noqa: F401
    with pytest.raises(ImportError, match="does not provide"):
        _ = vended.CedarAuthorization


def test_other_missing_names_are_attribute_errors_and_a_star_import_works() -> None:
    assert not hasattr(vended, "NoSuchHandler")
    namespace: dict[str, object] = {}
    exec("from ray_harness.vended_interventions import *", namespace)
    assert namespace["HumanInTheLoop"] is hitl_module.HumanInTheLoop
    assert sorted(vended.__all__) == ["HumanInTheLoop"]
