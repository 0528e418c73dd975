"""``ray_harness`` imports only what a plain ``pip install ray_harness`` installs.

A host process runs from the package's runtime dependencies alone: an import of a dev-only package (``cloudpickle``,
``moto``, ``strands``) in ``ray_harness/`` works in the test environment and fails on a fresh install (it did once:
``import cloudpickle`` in the host made every host of a fresh install fail to start). Each third-party top-level
module ``ray_harness`` imports is listed here with the runtime dependency that brings it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import ray_harness

# module → the runtime dependency (pyproject's [project] dependencies) that installs it
PROVIDED = {
    "a2a": "a2a-sdk",
    "anthropic": "anthropic",
    "anyio": "mcp",
    "boto3": "boto3",
    "botocore": "boto3",
    "docker": "docker",
    "google": "a2a-sdk (protobuf)",
    "httpx": "a2a-sdk, anthropic, openai, mcp",
    "httpx2": "mcp",
    "mcp": "mcp",
    "mcp_types": "mcp",
    "openai": "openai",
    "opentelemetry": "opentelemetry-api / -sdk / exporters",
    "paramiko": "paramiko",
    "pyarrow": "ray[data]",
    "pydantic": "pydantic",
    "pydantic_core": "pydantic",
    "ray": "ray",
    "starlette": "a2a-sdk[http-server]",
    "tqdm": "tqdm",
    "typing_extensions": "typing_extensions",
    "yaml": "pyyaml",
}
# Optional extras, imported only where they are asked for, behind an ImportError that says what to install.
OPTIONAL = {"aws_bedrock_token_generator"}


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_every_third_party_import_is_a_runtime_dependency() -> None:
    package = Path(ray_harness.__file__).parent
    unknown: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for module in _imported_modules(path) - set(sys.stdlib_module_names) - {"ray_harness", "__future__"}:
            if module not in PROVIDED and module not in OPTIONAL:
                unknown.setdefault(module, []).append(str(path.relative_to(package.parent)))
    assert not unknown, f"imported by ray_harness but not installed by its runtime dependencies: {unknown}"
