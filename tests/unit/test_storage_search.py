"""``ray_harness.storage.search``: keyword scoring helpers and the BM25 (SQLite FTS5) strategy."""

from __future__ import annotations

import pickle
from pathlib import Path

import cloudpickle
import pytest

from ray_harness.storage import InMemoryStorage, LocalFileStorage
from ray_harness.storage.search import Bm25SearchStrategy, Bm25SearchStrategyConfig, KeywordSearchStrategy
from ray_harness.storage.search.keyword import STOP_WORDS, token_overlap_score, tokenize


def test_tokenize_lowercases_unicode_words_and_drops_the_rest() -> None:
    assert tokenize("Dark-mode TOGGLE, naïve_case 42!") == {"dark", "mode", "toggle", "naïve_case", "42"}
    assert tokenize(" -- ") == set()


def test_token_overlap_counts_distinct_query_words_in_the_content() -> None:
    assert token_overlap_score({"dark", "mode", "coffee"}, "Dark mode, dark theme") == 2
    assert token_overlap_score({"x"}, "") == 0
    assert {"the", "what", "is"} <= STOP_WORDS and "dark" not in STOP_WORDS


async def test_keyword_search_refuses_a_query_that_is_not_text() -> None:
    with pytest.raises(TypeError, match="search query must be a str, got int"):
        await KeywordSearchStrategy().search(InMemoryStorage(), 3)  # type: ignore[arg-type]
    assert KeywordSearchStrategy.requires_host_fs is False


@pytest.fixture
async def bm25(tmp_path: Path) -> tuple[LocalFileStorage, Bm25SearchStrategy]:
    strategy = Bm25SearchStrategy()
    storage = LocalFileStorage(str(tmp_path / "memory"), search_strategy=strategy)
    await storage.write("auth.md", b"OAuth2 authentication flow with refresh tokens")
    await storage.write("ui.md", b"dark mode toggle; the toggle is in settings")
    await storage.write("auth-notes.md", b"authentication notes, authentication everywhere, authentication")
    return storage, strategy


async def test_bm25_ranks_indexed_entries_by_prefix_terms_all_required(
        bm25: tuple[LocalFileStorage, Bm25SearchStrategy]) -> None:
    storage, strategy = bm25
    hits = await storage.search("How does authentication work?")  # "work" is in no entry: nothing matches
    assert hits == []
    hits = await storage.search("authent")  # a prefix of the word
    assert [hit.key for hit in hits] == ["auth-notes.md", "auth.md"]
    assert all(0 < hit.score < 1 and hit.data is None for hit in hits) and hits[0].score > hits[1].score
    assert [hit.key for hit in await storage.search("dark toggle")] == ["ui.md"]
    assert await storage.search("a the") == []  # stop words and one-letter words only
    await strategy.close()


async def test_bm25_reindexes_changed_content_and_skips_hidden_keys(
        bm25: tuple[LocalFileStorage, Bm25SearchStrategy]) -> None:
    storage, strategy = bm25
    await storage.write("ui.md", b"light theme only")
    await storage.write("ui.md", b"light theme only")  # unchanged: the index keeps its one row
    await storage.write(".secret", b"dark dark dark")
    assert await storage.search("dark") == []
    assert [hit.key for hit in await storage.search("light")] == ["ui.md"]
    assert (Path(storage.base_dir).parent / ".__ray_harness_memory-fts5.sqlite").exists()
    await strategy.close()
    assert [hit.key for hit in await storage.search("light")] == ["ui.md"]  # reopened on use
    await strategy.close()


async def test_one_bm25_strategy_keeps_an_index_per_namespace_directory(tmp_path: Path) -> None:
    strategy = Bm25SearchStrategy()
    storage = LocalFileStorage(str(tmp_path), search_strategy=strategy)
    first, second = storage.namespace("a"), storage.namespace("b")
    await first.write("x.md", b"apples")
    await second.write("x.md", b"bananas")
    assert [hit.key for hit in await first.search("apples")] == ["x.md"]
    assert await second.search("apples") == []
    await strategy.close()


async def test_a_bm25_db_path_holds_one_directory(tmp_path: Path) -> None:
    strategy = Bm25SearchStrategy(Bm25SearchStrategyConfig(db_path=str(tmp_path / "index.sqlite")))
    storage = LocalFileStorage(str(tmp_path / "one"), search_strategy=strategy)
    await storage.write("k", b"words here")
    assert (tmp_path / "index.sqlite").exists()
    with pytest.raises(ValueError, match="already indexes"):
        await strategy.search(LocalFileStorage(str(tmp_path / "two")), "words")
    await strategy.close()


async def test_bm25_checks_its_arguments_and_pickles_without_its_connections(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="db_path must be a non-empty path or None"):
        Bm25SearchStrategyConfig(db_path="")
    with pytest.raises(TypeError, match="config must be a Bm25SearchStrategyConfig"):
        Bm25SearchStrategy({"db_path": "x"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a storage with a base_dir"):
        await Bm25SearchStrategy().search(InMemoryStorage(), "words")  # type: ignore[arg-type]
    strategy = Bm25SearchStrategy()
    storage = LocalFileStorage(str(tmp_path), search_strategy=strategy)
    await storage.write("k", b"persisted words")
    storage_copy = pickle.loads(cloudpickle.dumps(storage))
    assert [hit.key for hit in await storage_copy.search("persisted")] == ["k"]  # the same index file
    await storage_copy._search_strategy.close()
    await strategy.close()
    assert Bm25SearchStrategy.requires_host_fs is True
