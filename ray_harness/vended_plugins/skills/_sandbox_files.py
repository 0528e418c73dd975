"""Reading skills through an agent's sandbox: finding ``SKILL.md`` files and listing a skill's resources.

A path source may be a ``SKILL.md`` file, a skill directory or a parent of skill directories — as for
``Skill.from_file`` / ``Skill.from_directory``, but read with the sandbox's ``list_files`` / ``read_text`` so a
skill lives where the agent's tools run (this machine, a container, an SSH host). Paths stay sandbox paths
(joined with ``/``), never resolved on the driver.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ray_harness.vended_plugins.skills.skill import Skill, check_directory_name, find_skill_md_name

__all__ = ("list_resources", "load_path")

logger = logging.getLogger(__name__)

RESOURCE_DIRS = ("scripts", "references", "assets")
MAX_RESOURCE_DEPTH = 3


def _file_names(entries: list[Any]) -> list[str]:
    return [entry.name for entry in entries if not entry.is_dir]


async def _load_one(sandbox: Any, skill_dir: str, skill_md: str, *, strict: bool) -> Skill | None:
    """The skill of ``skill_md``, or None (logged) when it is invalid: one bad skill must not hide the others."""
    try:
        skill = Skill.from_content(await sandbox.read_text(skill_md), strict=strict)
        skill.path = Path(skill_dir)
        check_directory_name(skill, skill.path.name, strict=strict)
    except Exception as error:
        logger.warning("path=<%s> | failed to load skill: %s", skill_md, error)
        return None
    return skill


async def load_path(sandbox: Any, source: str | Path, *, strict: bool) -> list[Skill]:
    """The skills one path source names, read through ``sandbox``; problems are logged, never raised."""
    path = str(source)
    try:
        entries = await sandbox.list_files(path)
    except Exception:
        # Not a directory: a direct path to a SKILL.md is accepted, as Skill.from_file accepts it.
        if not path.lower().endswith("skill.md"):
            logger.warning("path=<%s> | skill source does not exist or is not a valid path", path)
            return []
        directory = path.rpartition("/")[0] if "/" in path else "."
        skill = await _load_one(sandbox, directory, path, strict=strict)
        return [skill] if skill is not None else []
    md_name = find_skill_md_name(_file_names(entries))
    if md_name is not None:
        skill = await _load_one(sandbox, path, f"{path}/{md_name}", strict=strict)
        return [skill] if skill is not None else []
    skills = []
    for entry in sorted((entry for entry in entries if entry.is_dir), key=lambda entry: entry.name):
        child = f"{path}/{entry.name}"
        try:
            child_md = find_skill_md_name(_file_names(await sandbox.list_files(child)))
        except Exception as error:
            logger.warning("path=<%s> | failed to load skill from sandbox: %s", child, error)
            continue
        if child_md is not None:
            skill = await _load_one(sandbox, child, f"{child}/{child_md}", strict=strict)
            if skill is not None:
                skills.append(skill)
    return skills


async def _walk(sandbox: Any, directory: str, depth: int = 0) -> list[str]:
    """Files under ``directory`` relative to it, ``MAX_RESOURCE_DEPTH`` directory levels deep at most."""
    if depth >= MAX_RESOURCE_DEPTH:
        return []
    found: list[str] = []
    for entry in await sandbox.list_files(directory):
        if entry.is_dir:
            found.extend(f"{entry.name}/{name}" for name in await _walk(sandbox, f"{directory}/{entry.name}",
                                                                        depth + 1))
        else:
            found.append(entry.name)
    return found


async def list_resources(sandbox: Any, skill_dir: str, max_files: int) -> list[str]:
    """The ``scripts/``, ``references/`` and ``assets/`` files of a skill, sorted per directory.

    At most ``max_files``; a truncation line follows them when there are more.
    """
    files: list[str] = []
    for resource_dir in RESOURCE_DIRS:
        try:
            names = await _walk(sandbox, f"{skill_dir}/{resource_dir}")
        except Exception:
            continue  # the resource directories are optional
        for name in sorted(names):
            files.append(f"{resource_dir}/{name}")
            if len(files) >= max_files:
                files.append(f"... (truncated at {max_files} files)")
                return files
    return files
