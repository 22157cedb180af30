"""The output boundary: nothing unstuck shows or writes for a person holds a secret (issue 23;
DESIGN.md, "Do no harm"). Where the store boundary (:func:`unstuck.store.engines.clean_params`) keeps
secrets out of what is kept, this module keeps them out of what is shown:
Internal: not a supported import path (docs/reference/index.md lists those that are).

* **the terminal and every stream**: :func:`redact_standard_streams` puts a
  :class:`RedactingWriter` in front of ``sys.stdout`` and ``sys.stderr`` for the whole of a
  command (``unstuck``'s entry point and its root callback call it), so every table, line,
  question, progress bar, error and traceback any command prints is redacted
  (:func:`unstuck.core.redact.redact`) on its way out, whoever printed it (rich, typer, ``print``);
* **JSON documents** (``--json`` on stdout or in a file): :func:`json_text` redacts the value
  before it is serialised (:func:`unstuck.core.redact.redact_value`: every string, a nested JSON
  document as one, keys named secret masked whole), so the document still parses and a value
  inside escaped JSON text is found too; :func:`write_json` writes one to a file;
* **other files** (HTML pages, reports, JSON lines): :func:`write_text`; HTML pages are
  rendered with :func:`finalize` as jinja2's ``finalize`` hook, which redacts every value
  before autoescaping turns ``"`` into ``&quot;`` (a ``password="…"`` is then still found).

The model still sees what a tool returned (DESIGN.md): the MCP proxy's standard output is its
channel to the agent, not a display, and is left as it is (:func:`raw_stdout`); what its
upstream server writes to standard error reaches the terminal through :func:`redacting_pipe`.

The writer holds back an incomplete last line until the next newline or flush, so a token
written in two pieces is redacted whole; a PEM private key block (RFC 7468) is masked whole
even when its lines come in separate writes. Text a program writes to the file descriptor
itself (``os.write(1, …)``, a child process inheriting it) does not pass through here.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TextIO

from unstuck.core.redact import redact, redact_document, redact_value

__all__ = [
    "RedactingWriter",
    "finalize",
    "json_text",
    "raw_stdout",
    "redact_standard_streams",
    "redacted_file",
    "redacting_pipe",
    "write_json",
    "write_text",
]

_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY( BLOCK)?-----")
_KEY_END = re.compile(r"-----END [A-Z ]*PRIVATE KEY( BLOCK)?-----")


class RedactingWriter(io.TextIOBase):
    """A text stream that redacts what is written to it (:func:`unstuck.core.redact.redact`)
    before passing it to ``inner``: complete lines at once, the rest of a line at the next
    newline or :meth:`flush`. Inside a PEM private key block (its ``BEGIN`` line written,
    its ``END`` line not yet), nothing is passed on until the block ends. ``isatty``,
    ``fileno``, ``encoding`` and ``errors`` are the inner stream's (a terminal stays a
    terminal for rich); ``buffer`` is not offered, so nothing writes around the redaction."""

    def __init__(self, inner: TextIO) -> None:
        super().__init__()
        self.inner = inner
        self._pending = ""
        self._in_key = False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8") or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.inner, "errors", None)

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    def write(self, text: str) -> int:
        """Take ``text``; pass on, redacted, every line it completes."""
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._pending += text
        cut = self._pending.rfind("\n")
        if cut >= 0:
            ready, self._pending = self._pending[:cut + 1], self._pending[cut + 1:]
            self._emit(ready)
        return len(text)

    def flush(self) -> None:
        """Pass on what is held back (redacted), then flush the inner stream."""
        if self._pending and not self._in_key:
            ready, self._pending = self._pending, ""
            self._emit(ready)
        self.inner.flush()

    def close(self) -> None:
        """Flush; the inner stream stays open (it is not this writer's)."""
        if not self.closed:
            self._in_key = False  # an unterminated key block ends with the stream: its rest was never shown
            self._pending = ""
            self.inner.flush()
        super().close()

    def _emit(self, text: str) -> None:
        if self._in_key:
            end = _KEY_END.search(text)
            if end is None:
                return  # still inside the key block: nothing of it is shown
            self._in_key = False
            text = text[end.end():]
        begins = list(_KEY_BEGIN.finditer(text))
        if begins and _KEY_END.search(text, begins[-1].end()) is None:
            self._in_key = True  # the block goes on in later writes; redact masks it to the end of this one
        self.inner.write(redact(text))


def redact_standard_streams() -> None:
    """Put a :class:`RedactingWriter` in front of ``sys.stdout`` and ``sys.stderr`` (once: a
    stream that is one already is left as it is). For the whole of a command: ``unstuck``'s
    entry point calls it before the command line is parsed, and its root callback again, for
    callers that run the app themselves (typer's test runner swaps the streams per call)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingWriter):
            setattr(sys, name, RedactingWriter(stream))


def raw_stdout() -> None:
    """Take the redaction off ``sys.stdout`` again, for the one command whose standard output
    is not shown to a person: the MCP proxy's, its protocol channel to the agent (what the
    model reads, as the tools returned it). Standard error stays redacted."""
    stream = sys.stdout
    if isinstance(stream, RedactingWriter):
        stream.flush()
        sys.stdout = stream.inner


def json_text(value: Any, **options: Any) -> str:
    """``value`` as JSON (``json.dumps`` with ``options``, e.g. ``indent=2``) with every
    string in it redacted first (:func:`unstuck.core.redact.redact_value`): the document a
    ``--json`` option prints or writes. The text still parses."""
    return json.dumps(redact_value(value), **options)


def finalize(value: Any) -> Any:
    """jinja2's ``finalize`` hook for the HTML pages: a string value redacted
    (:func:`unstuck.core.redact.redact_document`) before autoescaping; other values as they are."""
    return redact_document(value) if isinstance(value, str) else value


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (UTF-8; parent folders made), redacted
    (:func:`redacted_file`), through a file of its own beside it renamed into place, so a
    reader never sees half a file.

    Raises:
        OSError: the file or its folder cannot be written (the partial file is removed).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace(path, redacted_file(text))


def redacted_file(text: str) -> str:
    """A file's text redacted as what it is: one JSON document, or JSON lines (each line a
    document), structurally (:func:`unstuck.core.redact.redact_document`, so each still parses and
    a line without a secret is kept byte for byte); any other text (HTML, YAML, a log) by lines
    (:func:`unstuck.core.redact.redact`)."""
    if _is_json(text):
        return redact_document(text)
    lines = text.splitlines(keepends=True)
    if any(line.strip() for line in lines) and all(not line.strip() or _is_json(line) for line in lines):
        return "".join(redact_document(line) if line.strip() else line for line in lines)
    return redact(text)


def _is_json(line: str) -> bool:
    if line.lstrip()[:1] not in ("{", "["):
        return False
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True


def write_json(path: Path, value: Any, *, indent: int | None = 2) -> None:
    """Write ``value`` to ``path`` as JSON (:func:`json_text`, ``ensure_ascii=False``, a
    trailing newline), as :func:`write_text` writes a file.

    Raises:
        OSError: as :func:`write_text`.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace(path, json_text(value, indent=indent, ensure_ascii=False) + "\n")


def _replace(path: Path, text: str) -> None:
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


@contextmanager
def redacting_pipe(target: TextIO) -> Iterator[IO[str]]:
    """A file with a real descriptor (for a child process's standard error) whose text reaches
    ``target`` redacted (a :class:`RedactingWriter`), copied by a daemon thread until the
    block ends and the child has closed its end."""
    import threading

    read_fd, write_fd = os.pipe()
    writer = RedactingWriter(target) if not isinstance(target, RedactingWriter) else target
    reader = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace")

    def pump() -> None:
        with reader:
            for line in reader:
                writer.write(line)
                writer.flush()

    thread = threading.Thread(target=pump, name="unstuck-redacting-pipe", daemon=True)
    thread.start()
    handle = os.fdopen(write_fd, "w", encoding="utf-8")
    try:
        yield handle
    finally:
        handle.close()
        thread.join(timeout=5.0)

