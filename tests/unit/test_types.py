from __future__ import annotations

import pickle

import pytest

from ray_harness.types import exceptions as exc
from ray_harness.types.validation import MESSAGES, validate, validate_blocks, validate_messages


def _all_exception_classes() -> list[type[BaseException]]:
    classes = [getattr(exc, name) for name in exc.__all__]
    return [c for c in classes if isinstance(c, type) and issubclass(c, BaseException)]


def _instance(cls: type[BaseException]) -> BaseException:
    if cls is exc.EventLoopException:
        return cls(ValueError("inner"), {"k": 1})
    if cls is exc.ModelThrottledException:
        return cls("slow down", retry_after=2.5)
    if cls is exc.RemoteActorError:
        return cls("actor died", actor_name="ray_harness:agent:a")
    if cls is exc.AggregateMemoryError:
        return cls("memory store(s) failed: notes", [ValueError("bad entry")])
    return cls("boom")


@pytest.mark.parametrize("cls", _all_exception_classes(), ids=lambda c: c.__name__)
def test_every_exception_pickles_with_its_attributes(cls: type[BaseException]) -> None:
    error = _instance(cls)
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is cls
    assert str(clone) == str(error)
    assert clone.__dict__.keys() == error.__dict__.keys()
    for key, value in error.__dict__.items():
        if isinstance(value, BaseException):
            assert type(getattr(clone, key)) is type(value)
        elif isinstance(value, list) and value and isinstance(value[0], BaseException):  # AggregateMemoryError.errors
            assert [(type(e), str(e)) for e in getattr(clone, key)] == [(type(e), str(e)) for e in value]
        else:
            assert getattr(clone, key) == value


def test_interrupt_exception_pickles() -> None:
    from ray_harness.interrupts import Interrupt, InterruptException

    clone = pickle.loads(pickle.dumps(InterruptException(Interrupt("id1", "approve", {"why": 1}))))
    assert clone.interrupt == Interrupt("id1", "approve", {"why": 1})


def test_all_errors_share_one_base() -> None:
    for cls in _all_exception_classes():
        assert issubclass(cls, exc.RayHarnessError)


def test_message_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"messages\[0\]\.content\[0\]\.text"):
        validate(MESSAGES, [{"role": "user", "content": [{"text": 5}]}], "messages")
    with pytest.raises(ValueError, match=r"messages\[0\]\.role"):
        validate(MESSAGES, [{"role": "system", "content": []}], "messages")


def test_valid_messages_pass_unchanged() -> None:
    messages = [
        {"role": "user", "content": [{"text": "hi"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "x", "input": {"a": 1}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "status": "success",
                                                      "content": [{"json": {"v": [1, 2]}}]}}]},
    ]
    assert validate(MESSAGES, messages, "messages") == messages


def test_every_block_kind_strands_and_the_providers_know_survives_validation() -> None:
    # Such blocks used to become {} (unknown keys dropped): every provider then refused the request.
    video = {"video": {"format": "mp4", "source": {"bytes": b"\x00\xff"}}}
    document = {"document": {"format": "txt", "name": "n", "source": {"bytes": b"x"}, "citations": {"enabled": True},
                             "context": "c"}}
    messages = [
        {"role": "user", "content": [{"text": "a"}, video, document, {"cachePoint": {"type": "default"}},
                                     {"guardContent": {"text": {"text": "g"}}}]},
        {"role": "assistant", "content": [{"citationsContent": {"content": [{"text": "cited"}], "citations": []}}]},
    ]
    assert validate(MESSAGES, messages, "messages") == messages
    assert validate_messages(messages, "messages") == messages


def test_a_block_of_no_known_kind_is_named_not_emptied() -> None:
    with pytest.raises(ValueError, match=r"messages\[0\]\.content\[1\]: a content block needs one of .*got keys \['txt'\]"):
        validate_messages([{"role": "user", "content": [{"text": "a"}, {"txt": "typo"}]}], "messages")
    with pytest.raises(ValueError, match=r"prompt\[0\]: a content block needs one of .*got keys \[\]"):
        validate_blocks([{}], "prompt")
