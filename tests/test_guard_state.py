"""Saved guard state: states written by the release before the guard's split still load and
carry on, and the saved fields are the dataclass's, listed once (``unstuck.guard.state``)."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import fields
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from unstuck import Action, Guard, ToolCall
from unstuck.core.clock import VirtualClock
from unstuck.decide import policy
from unstuck.decide.escalation import Answer
from unstuck.decide.marks import is_nonce
from unstuck.guard.state import STATE_VERSION, GuardState, GuardStateError
from unstuck.store.lessons import LessonStore

DATA = Path(__file__).resolve().parent / "data"


def _maker() -> ModuleType:
    """tests/data/make_guard_states.py: the tools the fixtures were written with."""
    spec = importlib.util.spec_from_file_location("make_guard_states", DATA / "make_guard_states.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fixture(name: str) -> dict[str, Any]:
    saved = json.loads((DATA / name).read_text(encoding="utf-8"))
    assert isinstance(saved, dict)
    return saved


#: Fields of an open blocker that a later release added (issue 25: the call that opened it and
#: what that call exercised), with the value a state saved before them reads back as.
ADDED_BLOCKER_FIELDS: dict[str, Any] = {"opened_by": "", "reach": None}


def _without_added_defaults(document: Any) -> Any:
    """``document`` with each open blocker's :data:`ADDED_BLOCKER_FIELDS` dropped where they hold
    their defaults: what the previous release wrote."""
    if isinstance(document, dict):
        kept = {k: _without_added_defaults(v) for k, v in document.items()}
        if "opened_at_call" in kept and "budget" in kept:  # an open blocker's record
            for name, default in ADDED_BLOCKER_FIELDS.items():
                if name in kept and kept[name] == default:
                    del kept[name]
        return kept
    if isinstance(document, list):
        return [_without_added_defaults(v) for v in document]
    return document


def _same_but_elapsed(reloaded: dict[str, Any], saved: dict[str, Any]) -> None:
    assert reloaded.pop("elapsed_s") == pytest.approx(saved["elapsed_s"], abs=1e-6)
    if "nonce" not in saved:  # a state saved before the mark's nonce was kept gets a fresh one (issue 27)
        assert is_nonce(reloaded.pop("nonce"))
    assert _without_added_defaults(reloaded) == {k: v for k, v in saved.items() if k != "elapsed_s"}


def test_a_state_saved_mid_reply_by_the_previous_release_loads_and_saves_back_unchanged() -> None:
    saved = _fixture("guard_state_v1.json")
    assert saved["version"] == STATE_VERSION
    guard = Guard.from_json(json.dumps(saved), _maker().tools(), unattended=True,
                            clock=VirtualClock(follow_real_time=False))
    _same_but_elapsed(json.loads(guard.to_json()), saved)
    assert guard.state == policy.RecoveryState.from_dict(saved["state"])
    assert [s.to_dict() for s in guard.steps] == saved["steps"] and guard.turn_id == "t-midway"


def test_a_loaded_mid_reply_state_carries_on_its_pending_retry_queued_refusal_and_held_write() -> None:
    saved = _fixture("guard_state_v1.json")
    guard = Guard.from_json(json.dumps(saved), _maker().tools(), unattended=True,
                            clock=VirtualClock(follow_real_time=False))
    # the reply's first call was assessed: reported again, it gets the saved decision (charged once)
    again = guard.after(ToolCall.of("e1", "echo", {"text": "hello"}), "hello")
    assert again.action is Action.CONTINUE and again.content == "hello" and len(guard.steps) == 3
    # s1's retry is pending (retrying: 1): dispatched at once, and its second attempt is a retry step
    retry = ToolCall.of("s1", "svc", {"n": 1})
    assert guard.before(retry).action is Action.DISPATCH
    guard.after(retry, "HTTP 503 Service Unavailable")
    assert guard.steps[3].retry and guard.steps[3].call.id == "s1"
    # the write made before the pause (held_writes) is refused, never run
    refused = guard.call(ToolCall.of("x", "pay", {"order": "7"}))
    assert refused.action is Action.REFUSE and "intent-old" in refused.content


def test_an_escalated_state_of_the_previous_release_loads_latched_with_its_cited_lesson(tmp_path: Path) -> None:
    maker = _maker()
    maker.escalated(tmp_path)  # the lesson store the fixture's state cited (lesson 1, on gh)
    saved = _fixture("guard_state_v1_escalated.json")
    with LessonStore(tmp_path / "l.db") as lessons:
        guard = Guard.from_json(json.dumps(saved), maker.tools(), unattended=True, lessons=lessons,
                                fingerprint=lambda subject: f"{subject} 2.0", clock=VirtualClock(follow_real_time=False))
        _same_but_elapsed(json.loads(guard.to_json()), saved)
        assert guard.latched and guard.escalation is not None
        assert guard.escalation.to_dict() == saved["escalation"] and "lesson 1" in guard.escalation.text
        assert guard.call(ToolCall.of("later", "echo", {"text": "x"})).action is Action.REFUSE
        assert guard.answer(Answer.STOP).action is Action.ESCALATE
    without_store = json.loads(Guard.from_json(json.dumps(saved), maker.tools(), unattended=True).to_json())
    assert without_store["cited"] == {} and without_store["lessons_checked"] == []  # lessons it cannot read


#: Fields of the saved state that a later release added, each optional (issue 27: the nonce of
#: the turn's mark on unstuck's notes).
ADDED_FIELDS = {"nonce"}


def test_a_state_saved_now_has_exactly_the_fields_of_the_previous_releases_state() -> None:
    now = json.loads(Guard([], unattended=True, clock=VirtualClock()).to_json())
    assert set(now) == set(_fixture("guard_state_v1.json")) | ADDED_FIELDS == {
        "version", *(f.name for f in fields(GuardState))}


def test_a_saved_turn_keeps_its_marks_nonce_and_a_malformed_one_is_refused_by_name() -> None:
    guard = Guard([], unattended=True, clock=VirtualClock())
    saved = json.loads(guard.to_json())
    again = Guard.from_json(json.dumps(saved), [], unattended=True, clock=VirtualClock())
    assert is_nonce(saved["nonce"]) and again.mark == guard.mark == f"[unstuck {saved['nonce']}]"
    assert Guard([], unattended=True).mark != guard.mark  # a new turn draws its own
    for wrong in ("", "ABCDEF0123456789", "0123", "[unstuck] x", "0123456789abcdeg"):
        with pytest.raises(GuardStateError, match="nonce must be 16 lower-case hex digits"):
            GuardState.from_json(json.dumps({**saved, "nonce": wrong}))


def test_every_saved_field_reads_back_as_it_was_written() -> None:
    saved = GuardState.from_json(json.dumps(_fixture("guard_state_v1.json")))
    assert GuardState.from_dict(saved.to_dict()) == saved
    assert saved.reply is not None and list(saved.reply.refusals) == ["i1"] and saved.retrying == {"s1": 1}


@pytest.mark.parametrize("name", [f.name for f in fields(GuardState)])
def test_a_saved_field_of_the_wrong_type_is_refused_by_name(name: str) -> None:
    saved = {**_fixture("guard_state_v1.json"), "nonce": "0123456789abcdef"}
    saved[name] = object.__name__ if isinstance(saved[name], (dict, list, int, float)) or saved[name] is None else 5
    with pytest.raises(GuardStateError, match=f"{name} has the wrong type"):
        GuardState.from_json(json.dumps(saved))


# -- saving: the text is json.dumps of the redacted fields, each step written once (issue 24, item 7) --

def _seeded_state(key: bytes | None) -> tuple[GuardState, list[str]]:
    """A state whose steps carry every sourced secret format (tests/data/secret_samples.yaml) in
    their content and arguments, beside non-ASCII text and escapes, and its secret material."""
    from secret_samples import samples
    from unstuck.core.tools import CommandOutput, HttpResponse
    from unstuck.toolkit.specs import tool

    @tool(subject="svc")
    def svc(n: int, note: str = "") -> str:
        """A read tool."""
        return "ok"

    found = samples()
    outputs: list[object] = [s.text for s in found] + [
        "héllo wörld ✓", "a\\u0067hp_x https:\\/\\/x", "line\nnext\ttab \x01", CommandOutput("gh", 127, "", "gh: not found"),
        HttpResponse(429, '{"message": "slow down"}', (("Retry-After", "30"),)), {"rows": [[1, [2]]], "ok": True}]
    guard = Guard([svc], unattended=True, clock=VirtualClock(follow_real_time=False), state_key=key)
    for i, output in enumerate(outputs):
        call = ToolCall.of(f"c{i}", "svc", {"n": i, "note": found[i % len(found)].text if i % 3 == 0 else "é"})
        guard.before(call)
        guard.after(call, output)
    state = GuardState(turn_id="t-seeded", task=f"deploy with {found[0].text}", state=guard.state,
                       steps=list(guard.steps), held_writes={f"svc {found[1].text}": "ref-1"}, intents={"c1": "ref-2"})
    return state, [piece for s in found for piece in s.secrets]


def _as_the_rule_says(state: GuardState, key: bytes | None) -> str:
    """What GuardState.to_json's docstring says the text is: json.dumps of to_dict redacted whole,
    with a signature the HMAC-SHA256 of the canonical JSON of the rest (the previous release's code)."""
    import hashlib
    import hmac

    from unstuck.core.redact import redact_value

    saved = redact_value(state.to_dict())
    if key is not None:
        body = json.dumps(saved, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        saved["signature"] = hmac.new(key, body.encode("utf-8"), hashlib.sha256).hexdigest()
    return json.dumps(saved)


@pytest.mark.parametrize("key", [None, b"the caller's key"])
def test_a_saved_state_is_the_json_of_its_redacted_fields_each_time_it_is_saved(key: bytes | None) -> None:
    state, secrets = _seeded_state(key)
    expected = _as_the_rule_says(state, key)
    assert state.to_json(key) == expected
    assert state.to_json(key) == expected  # saved again: each step's text kept from the first save
    assert not [s for s in secrets if s in expected]
    loaded = GuardState.from_json(expected, key)
    assert loaded.to_json(key) == _as_the_rule_says(loaded, key) == expected


def test_a_step_replaced_in_a_state_is_written_anew_not_from_the_step_it_replaced() -> None:
    from dataclasses import replace

    state, _ = _seeded_state(None)
    first = json.loads(state.to_json())["steps"][0]
    state.steps[0] = replace(state.steps[0], content="changed since")
    again = json.loads(state.to_json())["steps"][0]
    assert again == {**first, "content": "changed since"}
    assert state.steps[0] == replace(state.steps[0]) and "_saved_json" not in repr(state.steps[0])


def test_a_state_holding_undecodable_tool_bytes_is_signed_and_verified() -> None:
    from unstuck.toolkit.specs import tool

    @tool(subject="svc")
    def svc(n: int) -> str:
        """A read tool."""
        return "ok"

    key = b"the caller's key"
    guard = Guard([svc], unattended=True, clock=VirtualClock(), state_key=key)
    raw = b"caf\xe9 \xff done".decode("utf-8", "surrogateescape")  # a tool's Latin-1 bytes, passed on as they came
    guard.before(call := ToolCall.of("c1", "svc", {"n": 1}))
    guard.after(call, raw)
    signed = guard.to_json()
    loaded = Guard.from_json(signed, [svc], unattended=True, state_key=key)
    assert [step.content for step in loaded.steps] == [step.content for step in guard.steps]
    assert "\udce9" in loaded.steps[0].content
    with pytest.raises(GuardStateError, match="does not verify"):
        Guard.from_json(signed.replace("done", "gone"), [svc], unattended=True, state_key=key)
