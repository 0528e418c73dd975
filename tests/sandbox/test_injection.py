"""Names and options that try to become shell syntax, CLI flags or local commands are refused."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ray_harness.sandbox import LANGUAGE_PATTERN, DockerSandbox, LocalEnvironment, SshSandbox
from ray_harness.sandbox._validation import check_language, export_lines, safe_path


@pytest.mark.parametrize("name", ["--privileged", "-v/:/host", "a b", "x;id", "name\n", ""])
def test_container_names_that_look_like_flags_are_rejected(name: str) -> None:
    with pytest.raises(ValueError, match=r"DockerSandbox\.(container|image)"):
        DockerSandbox(name)


@pytest.mark.parametrize(("field", "value"), [
    ("image", "--privileged"), ("image", "busybox; id"), ("user", "-u0"), ("user", "root\n"),
    ("network_mode", "--network=host"), ("working_dir", "relative/dir"), ("docker_host", "-H evil"),
    ("pids_limit", 0), ("nano_cpus", -1),
])
def test_docker_options_are_validated(field: str, value: object) -> None:
    arguments: dict[str, object] = {"image": "rh-busybox:test", field: value}
    with pytest.raises(ValueError, match=rf"DockerSandbox\.{field}"):
        DockerSandbox(**arguments)  # type: ignore[arg-type]


def test_docker_needs_exactly_one_target() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        DockerSandbox()
    with pytest.raises(ValueError, match="exactly one"):
        DockerSandbox("box", image="img")


@pytest.mark.parametrize("options", [
    {"ProxyCommand": "nc evil 22"}, {"proxycommand": "sh -c id"}, {"LocalCommand": "id"},
    {"PermitLocalCommand": "yes"}, {"KnownHostsCommand": "/bin/id"}, {"Match": "exec \"id\""},
])
def test_ssh_options_that_run_local_commands_need_opt_in(options: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="allow_unsafe_ssh_options"):
        SshSandbox("example.com", ssh_options=options)
    SshSandbox("example.com", ssh_options=options, allow_unsafe_ssh_options=True)  # explicit opt-in


@pytest.mark.parametrize(("options", "message"), [
    ({"Port": "22\nProxyCommand nc evil 22"}, "single line"),
    ({"Proxy Command": "x"}, "not an OpenSSH option name"),
    ({"ForwardAgent": "yes"}, "not supported"),
    ({"Include": "/tmp/evil_config"}, "not supported"),
    ({"Match": "host example.com"}, "not supported"),
])
def test_ssh_options_are_single_supported_lines(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SshSandbox("example.com", ssh_options=options, allow_unsafe_ssh_options=True)


@pytest.mark.parametrize("host", ["-oProxyCommand=id", "host name", "a;b", ""])
def test_ssh_host_cannot_be_an_option(host: str) -> None:
    with pytest.raises(ValueError, match=r"SshSandbox\.host"):
        SshSandbox(host)


def test_ssh_port_is_validated() -> None:
    with pytest.raises(ValueError, match=r"SshSandbox\.port"):
        SshSandbox("example.com", port=0)


@pytest.mark.parametrize("language", ["python3; rm -rf /", "python3\n", "python3 -c 'x'", "-e", "node|sh"])
def test_language_check_uses_fullmatch(language: str) -> None:
    with pytest.raises(ValueError):
        check_language(language)
    assert check_language("python3.11") == "python3.11"


def test_env_export_quotes_values() -> None:
    assert export_lines({"A": "x'$(id)"}) == "export A='x'\"'\"'$(id)'\n"
    with pytest.raises(ValueError, match="env key"):
        export_lines({"A B": "x"})
    with pytest.raises(ValueError, match="NUL"):
        export_lines({"A": "x\0y"})


def test_paths_starting_with_a_dash_are_not_options() -> None:
    assert safe_path("-rf") == "./-rf"
    assert safe_path("a b") == "'a b'"
    with pytest.raises(ValueError):
        safe_path("")


@pytest.mark.parametrize(("build", "field"), [
    (lambda: DockerSandbox(image="rh-busybox:test", max_output_chars=-1), "DockerSandbox.max_output_chars"),
    (lambda: DockerSandbox(image="rh-busybox:test", max_output_chars="big"), "DockerSandbox.max_output_chars"),
    (lambda: DockerSandbox(image="rh-busybox:test", mem_limit="lots"), "DockerSandbox.mem_limit"),
    (lambda: DockerSandbox(image="rh-busybox:test", mem_limit=0), "DockerSandbox.mem_limit"),
    (lambda: SshSandbox("example.com", working_dir=5), "SshSandbox.working_dir"),
    (lambda: SshSandbox("example.com", max_output_chars=-5), "SshSandbox.max_output_chars"),
    (lambda: SshSandbox("example.com", connect_timeout="x"), "SshSandbox.connect_timeout"),
    (lambda: SshSandbox("example.com", max_sessions=1), "SshSandbox.max_sessions"),
    (lambda: LocalEnvironment(working_dir=5), "LocalEnvironment.working_dir"),
    (lambda: LocalEnvironment(max_output_chars=-1), "LocalEnvironment.max_output_chars"),
    (lambda: LocalEnvironment(shell=""), "LocalEnvironment.shell"),
])
def test_bad_configuration_names_the_argument(build: Callable[[], object], field: str) -> None:
    # At construction, not at the first command (where a negative limit or a bad memory size used to surface
    # as an engine error or a bare TypeError that named nothing).
    with pytest.raises(ValueError, match=re.escape(field)):
        build()


def test_good_configuration_is_kept() -> None:
    assert DockerSandbox(image="rh-busybox:test", mem_limit="1.5g").settings.mem_limit == "1.5g"
    assert DockerSandbox(image="rh-busybox:test", mem_limit="512MB", max_output_chars=None).max_output_chars is None
    assert LocalEnvironment(Path("/tmp"), max_output_chars=0).working_dir == "/tmp"
    assert SshSandbox("example.com", connect_timeout=3, working_dir="/srv").settings.connect_timeout == 3.0


def test_language_pattern_is_exported_as_in_strands() -> None:
    assert LANGUAGE_PATTERN.fullmatch("python3") and not LANGUAGE_PATTERN.fullmatch("python3\n")
