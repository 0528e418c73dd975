"""``ray_harness.storage`` (Strands' ``strands.storage``): the key contract every backend keeps, then each backend."""

from __future__ import annotations

import builtins
import os
import pickle
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import boto3
import cloudpickle
import pytest
from moto import mock_aws

from ray_harness.sandbox.local import LocalEnvironment
from ray_harness.storage import InMemoryStorage, LocalFileStorage, S3Storage, Storage, s3_storage as s3_module
from ray_harness.storage.search import KeywordSearchStrategy, StorageSearchResult
from ray_harness.storage.storage import (
    _EPHEMERAL,
    _NAMESPACED,
    _NamespacedStorage,
    _normalize_key,
    _normalize_prefix,
    _resolve_namespace,
)
from ray_harness.types.exceptions import RayHarnessError, StorageError


@pytest.fixture
def s3_bucket(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="store")
        yield "store"


@pytest.fixture(params=["memory", "file", "s3"])
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    if request.param == "memory":
        yield InMemoryStorage()
    elif request.param == "file":
        yield LocalFileStorage(str(tmp_path / "store"))
    else:
        yield S3Storage(request.getfixturevalue("s3_bucket"), prefix="root", region_name="us-east-1")


# ---- the key helpers ---------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "normalized"), [
    ("a", "a"), ("/a//b/", "a/b"), ("a/./b", "a/./b"), ("..a/b..", "..a/b.."), ("x.md", "x.md")])
def test_a_key_collapses_slash_runs_and_loses_outer_slashes(key: str, normalized: str) -> None:
    assert _normalize_key(key) == normalized


@pytest.mark.parametrize(("key", "message"), [
    ("", "must not be empty"), ("///", "must not be empty"), ("a/../b", "'..' path segments"),
    ("..", "'..' path segments"), ("a\\b", "backslashes are not allowed")])
def test_an_invalid_key_is_a_storage_error(key: str, message: str) -> None:
    with pytest.raises(StorageError, match=message):
        _normalize_key(key)


def test_a_prefix_may_be_empty_and_keeps_its_trailing_slash() -> None:
    assert [_normalize_prefix(p) for p in ("", "/", "//a//b/", "a")] == ["", "", "a/b/", "a"]
    with pytest.raises(StorageError, match="Invalid storage prefix"):
        _normalize_prefix("a/../")
    with pytest.raises(TypeError, match="storage prefix must be a str, got int"):
        _normalize_prefix(3)  # type: ignore[arg-type]


def test_storage_error_is_a_ray_harness_error_that_pickles() -> None:
    error = pickle.loads(pickle.dumps(StorageError("Failed to read 'k'")))
    assert isinstance(error, RayHarnessError) and str(error) == "Failed to read 'k'"


# ---- the contract, on every shipped backend ----------------------------------------------------


async def test_bytes_round_trip_and_a_write_replaces(storage: Any) -> None:
    assert await storage.read("missing") is None
    await storage.write("a/b.txt", b"one")
    await storage.write("/a//b.txt/", bytearray(b"two"))  # the same key, normalized
    assert await storage.read("a/b.txt") == b"two"
    await storage.delete("a/b.txt")
    await storage.delete("a/b.txt")  # a missing key is no error
    assert await storage.read("a/b.txt") is None
    assert isinstance(storage, Storage)  # the protocol, checked at run time


async def test_list_gives_full_sorted_keys_under_a_plain_string_prefix(storage: Any) -> None:
    for key in ("b", "a/2", "a/1", "ab", "a/c/3"):
        await storage.write(key, b"x")
    assert await storage.list("") == ["a/1", "a/2", "a/c/3", "ab", "b"]
    assert await storage.list() == ["a/1", "a/2", "a/c/3", "ab", "b"]
    assert await storage.list("a") == ["a/1", "a/2", "a/c/3", "ab"]
    assert await storage.list("a/") == ["a/1", "a/2", "a/c/3"]
    assert await storage.list("//a//c") == ["a/c/3"]
    assert await storage.list("zzz") == []


async def test_bad_keys_and_data_are_refused_before_anything_is_stored(storage: Any) -> None:
    for call in (storage.write("../x", b"d"), storage.read("a\\b"), storage.delete(""), storage.list("..")):
        with pytest.raises(StorageError):
            await call
    with pytest.raises(TypeError, match="storage data must be bytes, got str"):
        await storage.write("k", "text")
    with pytest.raises(TypeError, match="storage key must be a str, got NoneType"):
        await storage.read(None)
    assert await storage.list("") == []


async def test_a_namespace_is_a_view_under_a_prefix_and_nests(storage: Any) -> None:
    await storage.write("outside", b"o")
    notes = storage.namespace("/notes/")
    await notes.write("n1", b"first note")
    deeper = notes.namespace("deep")
    await deeper.write("d1", b"d")
    assert await storage.list("") == ["notes/deep/d1", "notes/n1", "outside"]
    assert await notes.list("") == ["deep/d1", "n1"]
    assert await deeper.list("") == ["d1"]
    assert await notes.read("n1") == b"first note" and await storage.read("notes/n1") == b"first note"
    assert await notes.read("outside") is None
    assert getattr(notes, "_namespaced", None) is _NAMESPACED and _resolve_namespace(notes, "x") is notes
    assert await _resolve_namespace(storage, "notes").list("") == ["deep/d1", "n1"]


async def test_search_ranks_by_shared_words_and_a_namespace_searches_only_its_entries(storage: Any) -> None:
    await storage.write("auth.md", b"OAuth2 authentication flow for the login page")
    await storage.write("ui/dark-mode.md", b"The dark mode toggle lives in settings")
    await storage.write("notes/ideas.txt", b"dark roast coffee")
    hits = await storage.search("How does the dark mode toggle work?")
    assert [(hit.key, hit.score) for hit in hits] == [("ui/dark-mode.md", 3), ("notes/ideas.txt", 1)]
    assert hits[0].data == b"The dark mode toggle lives in settings"
    assert await storage.search("the what is") == []  # only stop words
    assert await storage.search("md") == []  # the extension is not a word of the key
    notes = storage.namespace("notes")
    assert [hit.key for hit in await notes.search("dark ideas")] == ["ideas.txt"]
    assert await notes.search("notes") == []  # the namespace's own prefix is not scored


# ---- InMemoryStorage -----------------------------------------------------------------------------


async def test_in_memory_namespaces_share_entries_and_clear_only_their_own() -> None:
    storage = InMemoryStorage()
    a, b = storage.namespace("a"), storage.namespace("b")
    await a.write("k", b"1")
    await b.write("k", b"2")
    a.clear()
    assert await storage.list("") == ["b/k"]
    assert getattr(a, "_ephemeral", None) is _EPHEMERAL
    storage.clear()
    assert await b.list("") == []


async def test_in_memory_entries_travel_in_a_pickle_and_namespaces_stay_shared() -> None:
    storage = InMemoryStorage()
    notes = storage.namespace("notes")
    await notes.write("n", b"kept")
    storage_copy, notes_copy = pickle.loads(cloudpickle.dumps((storage, notes)))
    await notes_copy.write("m", b"new")
    assert await storage_copy.list("") == ["notes/m", "notes/n"]
    assert await storage.list("") == ["notes/n"]  # the original is untouched
    assert repr(storage_copy) == "InMemoryStorage(entries=2)"


class _Recorder:
    """A search strategy recording what it was asked."""

    def __init__(self, fail: bool = False) -> None:
        self.indexed: list[tuple[Any, str, bytes]] = []
        self.fail = fail

    async def index(self, storage: Any, key: str, data: bytes, **kwargs: Any) -> None:
        if self.fail:
            raise OSError("index is full")
        self.indexed.append((storage, key, data))

    async def search(self, storage: Any, query: str, **kwargs: Any) -> list[StorageSearchResult]:
        return [StorageSearchResult(key=query, score=1.0)]


async def test_a_search_strategy_indexes_each_write_with_relative_keys_and_answers_search() -> None:
    strategy = _Recorder()
    storage = InMemoryStorage(search_strategy=strategy)
    scoped = storage.namespace("ns")
    await scoped.write("//x.md", b"body")
    assert strategy.indexed == [(scoped, "x.md", b"body")]
    assert await storage.search("q") == [StorageSearchResult("q", 1.0)]
    failing = InMemoryStorage(search_strategy=_Recorder(fail=True))
    with pytest.raises(StorageError, match="Wrote 'k' but indexing failed") as caught:
        await failing.write("k", b"v")
    assert isinstance(caught.value.__cause__, OSError) and await failing.read("k") == b"v"
    with pytest.raises(TypeError, match="search_strategy must have index"):
        InMemoryStorage(search_strategy=object())  # type: ignore[arg-type]


# ---- LocalFileStorage ----------------------------------------------------------------------------


async def test_local_files_are_the_keys_and_internal_files_are_not(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path / "store")  # a Path is accepted too
    await storage.write("a/b.json", b"{}")
    assert (tmp_path / "store" / "a" / "b.json").read_bytes() == b"{}"
    (tmp_path / "store" / "a" / ".__ray_harness_tmp_1").write_bytes(b"half")
    (tmp_path / "store" / ".__strands_tmp_2").write_bytes(b"half")
    assert await storage.list("") == ["a/b.json"] and storage.base_dir == str(tmp_path / "store")
    await storage.write("a/b.json", b"[]")  # replaced through a temporary file, which does not stay
    assert sorted(os.listdir(tmp_path / "store" / "a")) == [".__ray_harness_tmp_1", "b.json"]


async def test_local_namespace_is_a_local_storage_rooted_in_the_sub_directory(tmp_path: Path) -> None:
    storage = LocalFileStorage(str(tmp_path))
    scoped = storage.namespace("memory/user")
    assert isinstance(scoped, LocalFileStorage) and scoped.base_dir == str(tmp_path / "memory" / "user")
    assert storage.namespace("").base_dir == str(tmp_path)


async def test_local_failures_are_storage_errors_with_the_cause(tmp_path: Path) -> None:
    storage = LocalFileStorage(str(tmp_path))
    await storage.write("dir/file", b"x")
    with pytest.raises(StorageError, match="Failed to read 'dir'") as caught:
        await storage.read("dir")  # a directory, not a file
    assert isinstance(caught.value.__cause__, OSError)
    with pytest.raises(StorageError, match="Failed to write 'dir/file/deeper'"):
        await storage.write("dir/file/deeper", b"x")
    assert await storage.read("dir/file/deeper") is None  # a file where a directory would be: missing


async def test_local_storage_through_a_sandbox(tmp_path: Path) -> None:
    sandbox = LocalEnvironment(str(tmp_path))
    storage = LocalFileStorage("store").for_sandbox(sandbox)
    assert storage.for_sandbox(sandbox) is storage
    await storage.write("x/y.txt", b"through the sandbox")
    assert (tmp_path / "store" / "x" / "y.txt").read_bytes() == b"through the sandbox"
    assert await storage.list("") == ["x/y.txt"] and await storage.list("x/") == ["x/y.txt"]
    assert await storage.read("x/y.txt") == b"through the sandbox" and await storage.read("nope") is None
    await storage.delete("x/y.txt")
    await storage.delete("x/y.txt")
    assert await storage.list("") == []
    scoped = LocalFileStorage("store").namespace("ns")
    bound = scoped.for_sandbox(sandbox)
    assert getattr(bound, "_namespaced", None) is _NAMESPACED and bound.base_dir == os.path.join("store", "ns")


def test_local_storage_checks_its_arguments(tmp_path: Path) -> None:
    from ray_harness.storage.search import Bm25SearchStrategy

    with pytest.raises(ValueError, match="base_dir must be a non-empty directory path"):
        LocalFileStorage("")
    with pytest.raises(ValueError, match="requires host filesystem access"):
        LocalFileStorage(str(tmp_path), sandbox=LocalEnvironment(str(tmp_path)),
                         search_strategy=Bm25SearchStrategy())  # type: ignore[call-overload]
    storage = LocalFileStorage(str(tmp_path), search_strategy=Bm25SearchStrategy())
    with pytest.warns(UserWarning, match="dropping search strategy"):
        bound = storage.for_sandbox(LocalEnvironment(str(tmp_path)))
    assert bound._search_strategy is None


# ---- S3Storage (moto in process) -----------------------------------------------------------------


async def test_s3_objects_sit_under_the_prefix(s3_bucket: str) -> None:
    storage = S3Storage(s3_bucket, prefix="/agents//", region_name="us-east-1")
    await storage.write("session/abc", b"state")
    client = boto3.client("s3", region_name="us-east-1")
    assert client.get_object(Bucket=s3_bucket, Key="agents/session/abc")["Body"].read() == b"state"
    client.put_object(Bucket=s3_bucket, Key="elsewhere/x", Body=b"no")
    assert await storage.list("") == ["session/abc"] and storage.prefix == "agents/"
    scoped = storage.namespace("session")
    assert scoped.prefix == "agents/session/" and await scoped.list("") == ["abc"]
    assert scoped._get_client() is storage._get_client()  # a namespace shares its root's client


async def test_s3_lists_every_page(s3_bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(s3_module, "_PAGE", 2)
    storage = S3Storage(s3_bucket, region_name="us-east-1")
    for n in range(5):
        await storage.write(f"k{n}", b"x")
    assert await storage.list("k") == ["k0", "k1", "k2", "k3", "k4"]


async def test_s3_failures_are_storage_errors(s3_bucket: str) -> None:
    storage = S3Storage("no-such-bucket", region_name="us-east-1")
    for call in (storage.write("k", b"x"), storage.read("k"), storage.list("")):
        with pytest.raises(StorageError, match="S3"):
            await call


async def test_s3_pickles_and_the_copy_makes_its_own_client(s3_bucket: str) -> None:
    storage = S3Storage(s3_bucket, boto_session=boto3.Session(region_name="us-east-1"))
    await storage.write("k", b"data")
    storage_copy = pickle.loads(cloudpickle.dumps(storage))
    assert storage_copy._client is None and storage_copy._region_name == "us-east-1"
    assert await storage_copy.read("k") == b"data"


def test_s3_checks_its_arguments() -> None:
    with pytest.raises(StorageError, match="Cannot specify both region_name and boto_session"):
        S3Storage("b", region_name="us-east-1", boto_session=boto3.Session(region_name="us-east-1"))
    with pytest.raises(ValueError, match="bucket must be a non-empty bucket name"):
        S3Storage("")
    assert repr(S3Storage("b", prefix="p")) == "S3Storage('b', prefix='p/')"


# ---- your own backend --------------------------------------------------------------------------


class _DictStorage(Storage):
    """A minimal backend: no ``namespace`` of its own, the protocol's default ``search``."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    async def write(self, key: str, data: bytes) -> None:
        self.data[key] = data

    async def read(self, key: str) -> bytes | None:
        return self.data.get(key)

    async def delete(self, key: str) -> None:
        self.data.pop(key, None)

    async def list(self, query: str = "") -> builtins.list[str]:
        return sorted(key for key in self.data if key.startswith(query))


async def test_a_custom_backend_gets_keyword_search_and_a_generic_namespace() -> None:
    backend = _DictStorage()
    await backend.write("notes/a", b"dark mode")
    await backend.write("other", b"dark")
    assert [hit.key for hit in await backend.search("dark mode")] == ["notes/a", "other"]
    view = _resolve_namespace(backend, "notes")
    assert isinstance(view, _NamespacedStorage) and view.prefix == "notes/"
    await view.write("b", b"dark")
    assert backend.data["notes/b"] == b"dark" and await view.list() == ["a", "b"]
    assert [hit.key for hit in await view.search("dark")] == ["a", "b"]
    assert view.namespace("deep").prefix == "notes/deep/" and view.for_sandbox(object()) is view
    await view.delete("b")
    assert await view.read("b") is None and _resolve_namespace(view, "x") is view
    ephemeral = _NamespacedStorage(InMemoryStorage(), "x")
    assert getattr(ephemeral, "_ephemeral", None) is _EPHEMERAL


async def test_keyword_search_skips_an_entry_that_cannot_be_read() -> None:
    class Flaky(_DictStorage):
        async def read(self, key: str) -> bytes | None:
            if key == "bad":
                raise StorageError("unreadable")
            return await super().read(key)

    backend = Flaky()
    await backend.write("bad", b"dark")
    await backend.write("good", b"dark")
    assert [hit.key for hit in await KeywordSearchStrategy().search(backend, "dark")] == ["good"]


# ---- parity with Strands (when installed) ------------------------------------------------------


@pytest.mark.parametrize("make", [lambda _: InMemoryStorage(), lambda path: LocalFileStorage(str(path))])
async def test_the_same_operations_give_what_strands_gives(make: Callable[[Path], Any], tmp_path: Path) -> None:
    strands_storage = pytest.importorskip("strands.storage")
    ours = make(tmp_path / "ours")
    theirs = (strands_storage.InMemoryStorage() if isinstance(ours, InMemoryStorage)
              else strands_storage.LocalFileStorage(str(tmp_path / "theirs")))
    entries = {"a/x.md": b"alpha beta", "a/y.txt": b"beta gamma delta", "ab": b"gamma", "b/.env": b"alpha"}
    for storage in (ours, theirs):
        for key, data in entries.items():
            await storage.write(key, data)
    for prefix in ("", "a", "a/", "b/", "zz"):
        assert await ours.list(prefix) == await theirs.list(prefix)
    for query in ("beta gamma", "alpha", "env md", "the"):
        ours_hits = [(hit.key, hit.score) for hit in await ours.search(query)]
        assert ours_hits == [(hit.key, hit.score) for hit in await theirs.search(query)]
    ours_scoped, theirs_scoped = ours.namespace("a"), theirs.namespace("a")
    assert await ours_scoped.list("") == await theirs_scoped.list("")
    assert [h.key for h in await ours_scoped.search("beta")] == [h.key for h in await theirs_scoped.search("beta")]


# ---- Strands' deep import paths ----------------------------------------------------------------

DEEP_PATHS = {
    "storage.storage": ["Storage", "StorageSearchResult"],
    "storage.in_memory_storage": ["InMemoryStorage"],
    "storage.local_file_storage": ["LocalFileStorage"],
    "storage.s3_storage": ["S3Storage"],
    "storage.search.types": ["SearchStrategy", "SandboxSafeSearchStrategy"],
    "storage.search.keyword": ["KeywordSearchStrategy", "STOP_WORDS", "token_overlap_score", "tokenize"],
    "storage.search.bm25": ["Bm25SearchStrategy", "Bm25SearchStrategyConfig"],
}


@pytest.mark.parametrize("module", sorted(DEEP_PATHS))
def test_a_switched_deep_import_finds_the_same_objects(module: str) -> None:
    import importlib

    import ray_harness.storage
    import ray_harness.storage.search

    ours = importlib.import_module(f"ray_harness.{module}")
    for name in DEEP_PATHS[module]:
        assert name in ours.__all__, name
        for package in (ray_harness.storage, ray_harness.storage.search):
            if hasattr(package, name):
                assert getattr(package, name) is getattr(ours, name), name
    strands = pytest.importorskip("strands")
    theirs = importlib.import_module(f"{strands.__name__}.{module}")
    assert all(hasattr(theirs, name) for name in DEEP_PATHS[module])


def test_import_ray_harness_leaves_storage_unloaded() -> None:
    import subprocess
    import sys

    code = "import sys, ray_harness; print(any(m.startswith('ray_harness.storage') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.stdout.strip() == "False"
