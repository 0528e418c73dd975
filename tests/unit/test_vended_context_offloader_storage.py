"""The context offloader's storage backends and its search over offloaded text."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import boto3
import cloudpickle
import pytest
from moto import mock_aws

from ray_harness.sandbox.local import LocalEnvironment
from ray_harness.vended_plugins.context_offloader import FileStorage, InMemoryStorage, S3Storage
from ray_harness.vended_plugins.context_offloader.search import search_text

# ---- InMemoryStorage ---------------------------------------------------------------------------


async def test_in_memory_storage_keeps_bytes_and_type_under_counted_references() -> None:
    storage = InMemoryStorage()
    first = await storage.store("use-1_0", b"hello")
    second = await storage.store("use-1_1", b"{}", "application/json")
    assert (first, second) == ("mem_1_use-1_0", "mem_2_use-1_1")
    assert await storage.retrieve(second) == (b"{}", "application/json")
    with pytest.raises(KeyError, match="Reference not found: mem_3_x"):
        await storage.retrieve("mem_3_x")
    storage.clear()
    with pytest.raises(KeyError):
        await storage.retrieve(first)


async def test_in_memory_eviction_counts_cycles_since_last_use() -> None:
    storage = InMemoryStorage(evict_after_turns=2)
    kept, dropped = await storage.store("a", b"a"), await storage.store("b", b"b")
    storage._evict(2)
    await storage.retrieve(kept)  # used at cycle 2
    storage._evict(3)  # "b" was last used at cycle 0: 3 cycles ago
    assert await storage.retrieve(kept) == (b"a", "text/plain")
    with pytest.raises(KeyError):
        await storage.retrieve(dropped)
    never = InMemoryStorage(evict_after_turns=None)
    reference = await never.store("c", b"c")
    never._evict(10_000)
    assert await never.retrieve(reference) == (b"c", "text/plain")


@pytest.mark.parametrize("bad", [0, -1, True, "20"])
def test_in_memory_storage_names_a_bad_eviction_age(bad: Any) -> None:
    with pytest.raises(ValueError, match="evict_after_turns must be a positive integer or None"):
        InMemoryStorage(evict_after_turns=bad)


async def test_in_memory_storage_pickles_with_its_entries_and_a_fresh_lock() -> None:
    storage = InMemoryStorage()
    reference = await storage.store("k", b"data")
    storage._bind(1)
    copy = pickle.loads(cloudpickle.dumps(storage))
    assert await copy.retrieve(reference) == (b"data", "text/plain")
    copy._bind(2)  # the copy belongs to whichever agent it shipped with
    assert await copy.store("k", b"more") == "mem_2_k"


# ---- FileStorage -------------------------------------------------------------------------------


async def test_file_storage_writes_new_files_and_a_type_sidecar(tmp_path: Path) -> None:
    storage = FileStorage(str(tmp_path / "artifacts"))
    text_ref = await storage.store("use/../1_0", b"text")
    png_ref = await storage.store("use-1_1", b"\x89PNG", "image/png")
    assert text_ref.endswith("_1_use___1_0.txt") and "/" not in text_ref
    assert png_ref.endswith("_2_use-1_1.png")
    assert (tmp_path / "artifacts" / png_ref).read_bytes() == b"\x89PNG"
    sidecar = json.loads((tmp_path / "artifacts" / ".metadata.json").read_text())
    assert sidecar == {text_ref: "text/plain", png_ref: "image/png"}
    again = FileStorage(str(tmp_path / "artifacts"))  # a later process: the sidecar carries the types
    assert await again.retrieve(png_ref) == (b"\x89PNG", "image/png")
    assert await again.retrieve(str(tmp_path / "artifacts" / text_ref)) == (b"text", "text/plain")
    assert await again.retrieve(Path(text_ref).stem) == (b"text", "text/plain")


async def test_file_storage_never_reads_or_replaces_files_it_did_not_write(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    (artifacts / "secret.txt").write_text("not yours")
    (tmp_path / "outside.txt").write_text("not yours either")
    storage = FileStorage(str(artifacts))
    await storage.store("k", b"mine")
    for reference in ("secret.txt", "secret", str(artifacts / "secret.txt"), "../outside.txt",
                      str(tmp_path / "outside.txt")):
        with pytest.raises(KeyError, match="Reference not found"):
            await storage.retrieve(reference)
    assert sorted(os.listdir(artifacts))[:1] == [".metadata.json"]
    assert (artifacts / "secret.txt").read_text() == "not yours"
    assert len(os.listdir(artifacts)) == 3


async def test_file_storage_reports_a_recorded_file_that_is_gone(tmp_path: Path) -> None:
    storage = FileStorage(str(tmp_path))
    reference = await storage.store("k", b"x")
    (tmp_path / reference).unlink()
    with pytest.raises(KeyError, match=f"Reference not found: {reference}"):
        await storage.retrieve(reference)


async def test_file_storage_through_a_sandbox_reads_its_sidecar_on_first_use(tmp_path: Path) -> None:
    sandbox = LocalEnvironment(tmp_path)
    storage = FileStorage("artifacts").for_sandbox(sandbox)
    assert storage.for_sandbox(LocalEnvironment(tmp_path / "other")) is storage
    reference = await storage.store("k", b'{"a": 1}', "application/json")
    assert (tmp_path / "artifacts" / reference).read_bytes() == b'{"a": 1}'
    later = FileStorage("artifacts", sandbox=LocalEnvironment(tmp_path))
    assert later._content_types is None  # nothing read while being made
    assert await later.retrieve(reference) == (b'{"a": 1}', "application/json")
    copy = pickle.loads(cloudpickle.dumps(later))
    assert await copy.retrieve(reference) == (b'{"a": 1}', "application/json")


def test_file_storage_names_a_bad_directory() -> None:
    with pytest.raises(ValueError, match="artifact_dir must be a non-empty path"):
        FileStorage("")


# ---- S3Storage (moto in process) ---------------------------------------------------------------


@pytest.fixture
def s3_bucket(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="artifacts")
        yield "artifacts"


async def test_s3_storage_puts_objects_with_their_type_under_the_prefix(s3_bucket: str) -> None:
    storage = S3Storage(s3_bucket, prefix="/tool-results/", region_name="us-east-1")
    reference = await storage.store("use/1_0", b"\x89PNG", "image/png")
    assert reference.startswith("s3://artifacts/tool-results/") and reference.endswith("_1_use_1_0")
    assert await storage.retrieve(reference) == (b"\x89PNG", "image/png")
    key = reference.removeprefix("s3://artifacts/")
    assert await storage.retrieve(key) == (b"\x89PNG", "image/png")
    head = boto3.client("s3", region_name="us-east-1").head_object(Bucket=s3_bucket, Key=key)
    assert head["ContentType"] == "image/png"


async def test_s3_storage_reads_nothing_outside_its_bucket_and_prefix(s3_bucket: str) -> None:
    client = boto3.client("s3", region_name="us-east-1")
    client.put_object(Bucket=s3_bucket, Key="other/secret", Body=b"no")
    storage = S3Storage(s3_bucket, prefix="mine", region_name="us-east-1")
    for reference in ("s3://artifacts/other/secret", "other/secret", "s3://elsewhere/mine/x", "mine/missing"):
        with pytest.raises(KeyError, match="Reference not found"):
            await storage.retrieve(reference)


async def test_s3_storage_pickles_and_the_copy_makes_its_own_client(s3_bucket: str) -> None:
    storage = S3Storage(s3_bucket, boto_session=boto3.Session(region_name="us-east-1"))
    reference = await storage.store("k", b"data")
    copy = pickle.loads(cloudpickle.dumps(storage))
    assert copy._client is None and copy._region_name == "us-east-1"
    assert await copy.retrieve(reference) == (b"data", "text/plain")


def test_s3_storage_names_a_bad_bucket() -> None:
    with pytest.raises(ValueError, match="bucket must be a non-empty bucket name"):
        S3Storage("")


# ---- search ------------------------------------------------------------------------------------

TEXT = "\n".join(f"row {n}" for n in range(1, 21))


def test_matches_merge_overlapping_context_and_mark_gaps() -> None:
    found = search_text(TEXT, pattern="row (3|5|15)$", line_range=None, context_lines=1, max_chars=10_000)
    assert found == ("[3 matches for /row (3|5|15)$/]\n\n"
                     "   2| row 2\n>  3| row 3\n   4| row 4\n>  5| row 5\n   6| row 6\n---\n"
                     "  14| row 14\n> 15| row 15\n  16| row 16")


def test_a_bad_or_risky_regex_is_matched_literally() -> None:
    assert search_text("a (b\nx", pattern="(b", line_range=None, context_lines=0, max_chars=100) == \
        "[1 match for /(b/]\n\n> 1| a (b"
    risky = "(a+)+$"
    assert search_text(f"aaaa!\n{risky}", pattern=risky, line_range=None, context_lines=0, max_chars=100) == \
        f"[1 match for /{risky}/]\n\n> 2| {risky}"


def test_output_is_cut_at_a_line_break_within_the_budget() -> None:
    found = search_text(TEXT, pattern=None, line_range=(1, 20), context_lines=0, max_chars=30)
    assert found == "[Lines 1-20 of 20]\n\n   1| row 1\n   2| row 2\n\n[output truncated, narrow your range]"


def test_a_range_past_the_end_is_clipped_and_bad_ranges_are_named() -> None:
    assert search_text("a\nb", pattern=None, line_range=(2, 9), context_lines=0, max_chars=100) == \
        "[Lines 2-2 of 2]\n\n  2| b"
    assert search_text("", pattern="x", line_range=None, context_lines=5, max_chars=100) == \
        "Content is empty (0 lines)."
    with pytest.raises(ValueError, match=r"line_range.start \(0\) must be >= 1"):
        search_text(TEXT, pattern=None, line_range=(0, 3), context_lines=0, max_chars=100)
    with pytest.raises(ValueError, match=r"line_range.start \(5\) must be <= line_range.end \(4\)"):
        search_text(TEXT, pattern=None, line_range=(5, 4), context_lines=0, max_chars=100)
