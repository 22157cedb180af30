"""The output boundary (issue 23): the redacting writer in front of a command's streams, JSON
documents redacted before they are serialised, files, HTML pages, a child's standard error."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest

from unstuck.output import (
    RedactingWriter,
    finalize,
    json_text,
    raw_stdout,
    redact_standard_streams,
    redacting_pipe,
    write_json,
    write_text,
)
from unstuck.redact import MASK, redact

#: GitHub's documented token shape (github.blog changelog 2021-03-31, "Authentication token
#: format updates": ``ghp_`` and 36 letters or digits).
TOKEN = "ghp_" + "Q1w2E3r4T5" * 3 + "y6U7i8"
#: The body of a PEM private key (RFC 7468 section 10), one base64 line of it.
KEY_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"


def test_a_token_written_in_two_pieces_is_masked_whole() -> None:
    inner = io.StringIO()
    writer = RedactingWriter(inner)
    writer.write(f"token is {TOKEN[:10]}")
    writer.write(f"{TOKEN[10:]} ok\n")
    assert inner.getvalue() == f"token is {MASK} ok\n"


def test_a_partial_line_waits_for_its_newline_or_a_flush() -> None:
    inner = io.StringIO()
    writer = RedactingWriter(inner)
    writer.write("progress 50%")
    assert inner.getvalue() == ""
    writer.flush()
    assert inner.getvalue() == "progress 50%"


def test_a_private_key_written_line_by_line_with_flushes_is_never_shown() -> None:
    inner = io.StringIO()
    writer = RedactingWriter(inner)
    for line in ("before\n", "-----BEGIN PRIVATE KEY-----\n", f"{KEY_BODY}\n", f"{KEY_BODY[::-1]}\n",
                 "-----END PRIVATE KEY-----\n", "after\n"):
        writer.write(line)
        writer.flush()
    shown = inner.getvalue()
    assert KEY_BODY not in shown and KEY_BODY[::-1] not in shown
    assert shown.startswith("before\n") and shown.endswith("after\n") and MASK in shown


def test_the_writer_stays_a_terminal_and_offers_no_buffer_to_write_around_it() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    writer = RedactingWriter(Terminal())
    assert writer.isatty() and not hasattr(writer, "buffer")
    with pytest.raises(TypeError):
        writer.write(b"bytes")  # type: ignore[arg-type]


def test_the_standard_streams_are_wrapped_once_and_the_proxy_takes_its_stdout_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    redact_standard_streams()
    redact_standard_streams()
    assert isinstance(sys.stdout, RedactingWriter) and sys.stdout.inner is out
    assert isinstance(sys.stderr, RedactingWriter) and sys.stderr.inner is err
    print(f"GH_TOKEN={TOKEN}")
    print(f"Bearer {TOKEN}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    assert out.getvalue() == f"GH_TOKEN={MASK}\n" and TOKEN not in err.getvalue()
    raw_stdout()
    assert sys.stdout is out and isinstance(sys.stderr, RedactingWriter)


def test_json_text_still_parses_and_finds_a_value_that_escaped_json_hides() -> None:
    command = 'export PASSWORD="hunter2hunter2"; deploy'
    message = {"role": "assistant", "content": command,
               "tool_calls": [["c1", "run", json.dumps({"command": command, "token": TOKEN})]]}
    plain = json.dumps(message)
    as_text = redact(plain)  # text redaction sees through escaped quotes too (RFC 8259 section 7), and keeps them
    assert "hunter2hunter2" not in as_text and json.loads(json.loads(as_text)["tool_calls"][0][2])["token"] == MASK
    document = json.loads(json_text(message, indent=2))
    assert document["content"] == f'export PASSWORD="{MASK}"; deploy'
    assert json.loads(document["tool_calls"][0][2]) == {"command": f'export PASSWORD="{MASK}"; deploy', "token": MASK}


def test_an_html_page_finds_a_quoted_password_before_autoescaping_hides_it() -> None:
    text = 'password="hunter2hunter2"'

    def render(**options: object) -> str:
        environment = jinja2.Environment(autoescape=True, **options)  # type: ignore[arg-type]
        return environment.from_string("<td>{{ value }}</td>").render(value=text)

    escaped = render()
    assert "hunter2hunter2" in redact(escaped)  # &quot; hides the value from redaction of the page
    assert "hunter2hunter2" not in render(finalize=finalize)


def test_files_are_written_redacted_and_whole(tmp_path: Path) -> None:
    write_json(tmp_path / "a" / "r.json", {"answer": f"used {TOKEN}", "api_key": "abcd1234efgh"})
    write_text(tmp_path / "r.html", f"<p>{TOKEN}</p>\n")
    assert json.loads((tmp_path / "a" / "r.json").read_text(encoding="utf-8")) == {"answer": f"used {MASK}",
                                                                                 "api_key": MASK}
    assert (tmp_path / "r.html").read_text(encoding="utf-8") == f"<p>{MASK}</p>\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "r.html", "r.json"]  # no partial file left


def test_a_childs_standard_error_reaches_the_terminal_redacted() -> None:
    shown = io.StringIO()
    with redacting_pipe(shown) as errlog:
        subprocess.run([sys.executable, "-c", f"import sys; sys.stderr.write('login with {TOKEN}\\n')"],
                       stderr=errlog, check=True)
    assert shown.getvalue() == f"login with {MASK}\n"


def test_a_json_lines_file_keeps_every_line_a_document_and_clean_lines_byte_for_byte(tmp_path: Path) -> None:
    clean = json.dumps({"msgid": "Permission denied", "msgstr": "Keine Berechtigung"}, ensure_ascii=False)
    leaky = json.dumps({"output": f'export PASSWORD="hunter2hunter2" GH_TOKEN={TOKEN}'})
    write_text(tmp_path / "t.jsonl", f"{clean}\n{leaky}\n")
    lines = (tmp_path / "t.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines[0] == clean
    assert json.loads(lines[1]) == {"output": f'export PASSWORD="{MASK}" GH_TOKEN={MASK}'}
