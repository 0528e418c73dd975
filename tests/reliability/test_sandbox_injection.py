"""Hypothesis-generated names, keys, values and paths against the sandbox defences (LocalEnvironment and the
shell-built PosixShellSandbox path): every input is either refused with ValueError or delivered literally."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ray_harness.sandbox import LocalEnvironment

pytestmark = pytest.mark.reliability

ENV_KEY = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
LANGUAGE = re.compile(r"[a-zA-Z0-9._-]+")
# Shell metacharacters are over-represented on purpose.
hostile = st.text(alphabet=st.sampled_from(list("$`'\"\\;|&<>(){}[]*?!~#\n\t -=aZ0_.%^,")) | st.characters(
    blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24)


def _run(coroutine: object) -> object:
    return asyncio.run(coroutine)  # type: ignore[arg-type]


@settings(max_examples=200)
@given(value=hostile)
def test_env_values_arrive_literally(value: str) -> None:
    result = _run(LocalEnvironment().execute('printf "%s" "$PROBE"', env={"PROBE": value}))
    assert result.exit_code == 0
    assert result.stdout == value


@settings(max_examples=300)
@given(key=hostile)
def test_env_keys_must_be_identifiers(key: str) -> None:
    sandbox = LocalEnvironment()
    if ENV_KEY.fullmatch(key):
        result = _run(sandbox.execute("true", env={key: "x"}))
        assert result.exit_code == 0
    else:
        with pytest.raises(ValueError):
            _run(sandbox.execute("true", env={key: "x"}))


@settings(max_examples=300)
@given(language=hostile)
def test_interpreter_names_are_refused_unless_plain(language: str, tmp_path_factory: pytest.TempPathFactory
                                                    ) -> None:
    witness = tmp_path_factory.mktemp("witness") / "pwned"
    sandbox = LocalEnvironment()
    code = f"touch {witness}"
    try:
        _run(sandbox.execute_code(code, language))
    except ValueError:
        assert not (LANGUAGE.fullmatch(language) and not language.startswith("-"))
    # Whatever happened, the name itself never ran a command of ours: only an interpreter named exactly
    # "sh"/"bash"/"dash" would execute the code, and those are plain names.
    if witness.exists():
        assert language.strip() in ("sh", "bash", "dash")


@settings(max_examples=200)
@given(name=st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/"),
                    min_size=1, max_size=30).filter(lambda n: n not in (".", "..")),
       payload=st.binary(max_size=256))
def test_file_names_round_trip_and_stay_inside(name: str, payload: bytes,
                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("box")
    sandbox = LocalEnvironment(working_dir=root)
    _run(sandbox.write_file(name, payload))
    assert _run(sandbox.read_file(name)) == payload
    created = [p for p in Path(root).rglob("*") if p.is_file()]
    assert [p.name for p in created] == [name]  # nothing outside the working directory, nothing else


@pytest.fixture(scope="module")
def docker_box() -> object:
    """A container sandbox (the shell-built PosixShellSandbox path: heredocs, base64, exports)."""
    import os

    from ray_harness.sandbox import DockerSandbox
    from tests.conftest import missing_service

    image = os.environ.get("RAY_HARNESS_TEST_IMAGE", "rh-busybox:test")
    try:
        import docker

        docker.from_env(version="auto").images.get(image)
    except Exception as error:
        missing_service(f"dockerd with image {image} (run scripts/ci/docker.sh): {error}")
    box = DockerSandbox(image=image, working_dir="/tmp")
    _run(box.start())
    yield box
    _run(box.close())


@settings(max_examples=30)
@given(value=hostile)
def test_env_values_arrive_literally_in_a_container(docker_box: object, value: str) -> None:
    result = _run(docker_box.execute('printf "%s" "$PROBE"', env={"PROBE": value}))  # type: ignore[attr-defined]
    assert result.exit_code == 0
    assert result.stdout == value


@settings(max_examples=30)
@given(name=st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126, blacklist_characters="/"),
                    min_size=1, max_size=20).filter(lambda n: n not in (".", "..")),
       payload=st.binary(max_size=128))
def test_file_names_round_trip_in_a_container(docker_box: object, name: str, payload: bytes) -> None:
    path = f"/tmp/fuzz/{name}"
    _run(docker_box.write_file(path, payload))  # type: ignore[attr-defined]
    assert _run(docker_box.read_file(path)) == payload  # type: ignore[attr-defined]
    listed = [info.name for info in _run(docker_box.list_files("/tmp/fuzz"))]  # type: ignore[attr-defined]
    assert name in listed
    _run(docker_box.remove_file(path))  # type: ignore[attr-defined]
