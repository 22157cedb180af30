"""Secrets never stored or shown: redaction of known token formats and of values named
secret, and the journal and events of a real turn kept free of them."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import PlaybackModel
from unstuck.clock import VirtualClock
from unstuck.events import EventLog
from unstuck.journal import Journal
from unstuck.loop import run_turn
from unstuck.redact import MASK, redact, redact_value
from unstuck.tools import tool

#: GitHub's documented token shape: a prefix, an underscore, 36 characters (GitHub docs,
#: "About authentication to GitHub": ghp_ personal access tokens).
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
#: AWS's own example access key id (AWS docs, "Managing access keys for IAM users").
AWS = "AKIAIOSFODNN7EXAMPLE"
#: The JWT of RFC 7519 section 3.1.
JWT = ("eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFt"
       "cGxlLmNvbS9pc19yb290Ijp0cnVlfQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")


def test_tokens_of_known_formats_are_masked_whole() -> None:
    for secret in (GITHUB, AWS, JWT, "xoxb-123456789012-abcdefghijkl"):
        masked = redact(f"the value is {secret} here")
        assert secret not in masked and MASK in masked and masked.startswith("the value is ")


def test_values_of_names_that_say_secret_are_masked_and_the_name_stays() -> None:
    assert redact("export GH_TOKEN=abcd1234efgh") == f"export GH_TOKEN={MASK}"
    assert redact("password: hunter2hunter2") == f"password: {MASK}"
    assert redact('{"api_key": "abcd1234efgh", "name": "x"}') == f'{{"api_key": "{MASK}", "name": "x"}}'
    assert redact("curl --token abcd1234efgh https://x") == f"curl --token {MASK} https://x"
    assert redact("Authorization: Bearer abcd1234efgh") == f"Authorization: Bearer {MASK}"
    assert redact("git clone https://me:hunter2@github.com/o/r") == f"git clone https://me:{MASK}@github.com/o/r"


def test_a_private_key_block_is_masked_whole() -> None:
    block = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
    assert "b3BlbnNzaC1" not in redact(f"key:\n{block}\nafter")


def test_text_without_secrets_is_left_as_it_is() -> None:
    for text in ("max_tokens=1000 tokens used", "the token was refused", "GH_TOKEN=$(cat token.txt)",
                 "ordinary output\nwith lines"):
        assert redact(text) == text


def test_nested_values_are_redacted_and_secret_keys_masked() -> None:
    value = {"token": "abc123", "list": [f"x {GITHUB}"], "deep": {"password": "pw12345"}, "n": 3}
    assert redact_value(value) == {"token": MASK, "list": [f"x {MASK}"], "deep": {"password": MASK}, "n": 3}


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_redaction_never_raises_and_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


def test_a_turn_keeps_secrets_out_of_its_journal_and_events_but_the_model_saw_them(tmp_path: Path) -> None:
    @tool
    def env() -> str:
        """Print the environment."""
        return f"HOME=/root\nGH_TOKEN={GITHUB}\nAWS_ACCESS_KEY_ID={AWS}\n"

    model = PlaybackModel([("env", {}), "done"])
    log = EventLog()
    with Journal(tmp_path / "j.db") as journal:
        run_turn("t", model=model, tools=[env], unattended=True, clock=VirtualClock(), journal=journal, events=log,
                 turn_id="t1")
        stored = json.dumps([s.content for s in journal.steps("t1")]) + json.dumps(journal.messages("t1"))
    raw = (tmp_path / "j.db").read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("j.db-*"))
    for secret in (GITHUB, AWS):
        assert secret not in stored and secret.encode() not in raw
        assert all(secret not in json.dumps(e.to_dict()) for e in log)
    assert any(GITHUB in m.content for m in model.requests[-1][0])  # the model saw what the tool returned


def test_a_huge_tool_output_is_journaled_bounded_with_its_digest(tmp_path: Path) -> None:
    import hashlib

    from unstuck.loop import STORED_TEXT_CAP

    huge = "x" * 5_000_000

    @tool
    def dump() -> str:
        """Print a lot."""
        return huge

    with Journal(tmp_path / "j.db") as journal:
        run_turn("t", model=PlaybackModel([("dump", {}), "done"]), tools=[dump], unattended=True,
                 clock=VirtualClock(), journal=journal, turn_id="t1")
        stored = [json.loads(m)["content"] for m in journal.messages("t1")]
    kept = max(stored, key=len)
    dropped = huge[STORED_TEXT_CAP // 2: -(STORED_TEXT_CAP // 2)]
    assert len(kept) < STORED_TEXT_CAP + 200
    assert hashlib.sha256(dropped.encode()).hexdigest() in kept
    assert (tmp_path / "j.db").stat().st_size < 2_000_000


def test_text_with_undecodable_bytes_is_redacted_not_fatal() -> None:
    text = b"GH_TOKEN=abcd1234efgh \xff\xfe".decode("utf-8", "surrogateescape")
    assert "abcd1234efgh" not in redact(text)


def test_cached_token_formats_are_detect_secrets_own_patterns() -> None:
    """The formats are read from detect-secrets' plugins once and kept in the cache; what the
    cache gives is what the library holds now."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    from unstuck import redact as module

    expected = {(p.pattern, int(p.flags)) for plugin in get_mapping_from_secret_type_to_class().values()
                if plugin.__name__ in module._FORMAT_PLUGINS for p in getattr(plugin, "denylist", ())}
    module._format_patterns.cache_clear()
    got = {(p.pattern.removeprefix("(?:").removesuffix(")[A-Za-z0-9_-]*"), int(p.flags))
           for p in module._format_patterns()}
    assert {(source, flags & ~re.UNICODE) for source, flags in got} == \
        {(source, flags & ~re.UNICODE) for source, flags in expected}
    assert len(expected) >= 15


def test_an_authorization_scheme_stays_when_its_token_is_of_a_known_format() -> None:
    """RFC 9110 11.6.2: ``Authorization: <scheme> <credentials>``; the scheme is a word, not
    the secret (a GitHub token is masked by its format first, and the scheme must not be)."""
    token = "ghp_" + "a1B2" * 9
    assert redact(f"Authorization: Bearer {token}") == "Authorization: Bearer ***"
    assert redact(f"authorization: token {token}") == "authorization: token ***"
    assert redact("Authorization: Basic dXNlcjpwYXNz") == "Authorization: Basic ***"
