"""Bounded reading of the files and streams unstuck is handed: JSON, YAML, text, stdin.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Every reader of a file the user gives (a scenario, a signal file, a failure bank, a casebook,
an eval baseline, saved guard state) goes through here, so a hostile or broken file gives one
error naming the file, never a ``RecursionError``, a ``UnicodeDecodeError`` or a traceback:

* nesting deeper than :data:`MAX_DEPTH` levels is refused, in JSON and in YAML alike (a
  10^5-deep ``[[[…]]]`` would otherwise exhaust the interpreter's recursion limit in the
  parser or in the code that walks the result); a YAML document whose aliases make it
  contain itself is refused too;
* text that is not UTF-8 is refused with the byte offset of the first bad byte;
* a stream read for classification keeps only its head and its tail
  (:func:`read_head_tail`), so 1 GB on stdin costs a bounded amount of memory.

Errors: each function raises the ``error`` class it is given (default :class:`ReadError`),
so a caller keeps its own error type (``ScenarioError``, ``BankError`` …); the class must
take one message argument.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import yaml

from unstuck.core.errors import UnstuckError
from unstuck.core.jsonshape import measure

__all__ = [
    "MAX_DEPTH",
    "MAX_EXPANDED",
    "HeadTail",
    "ReadError",
    "check_depth",
    "parse_json",
    "parse_yaml",
    "read_head_tail",
    "read_text",
    "read_text_window",
]

#: The deepest nesting (mappings and lists inside each other) a file may have. Far above
#: what any unstuck file needs (a scenario nests about 6 levels) and far below the
#: interpreter's recursion limit (1,000 frames), which the parsers and the code that walks
#: their results both spend.
MAX_DEPTH = 100

#: libyaml's parser when PyYAML has it (the same safe constructor); libyaml itself refuses
#: nesting past 1,000 levels ("exceeded maximum nesting depth", libyaml 0.2.5 src/parser.c
#: ``MAX_NESTING_LEVEL``), the pure-Python parser recurses until ``RecursionError``.
_BaseSafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _SafeLoader(_BaseSafeLoader):  # type: ignore[misc,valid-type]
    """The safe loader, refusing a key given twice in one mapping: YAML 1.2.2 section 3.2.1.1
    ("The content of a mapping node is an unordered set of key/value node pairs, with the
    restriction that each of the keys is unique"), where PyYAML silently keeps the last."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: PyYAML's own error follows
                continue
            if duplicate:
                mark = key_node.start_mark
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, f"found the key {key!r} twice", mark)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]

#: UTF-8 encodes a character in at most 4 bytes (RFC 3629 section 3).
_UTF8_MAX_BYTES = 4
_CHUNK_BYTES = 1 << 20


class ReadError(UnstuckError, ValueError):
    """A file or stream unstuck could not read: unreadable, not UTF-8, not JSON or YAML,
    nested too deeply, or containing itself. The message names the file."""


def _containers(value: object) -> list[object]:
    if isinstance(value, Mapping):
        return [v for pair in value.items() for v in pair if isinstance(v, Mapping | list | tuple | set | frozenset)]
    if isinstance(value, list | tuple | set | frozenset):
        return [v for v in value if isinstance(v, Mapping | list | tuple | set | frozenset)]
    return []


#: Values (containers, keys and scalars) a document may hold once its YAML aliases are
#: expanded: each alias is one more copy for whoever serialises it (a "billion laughs"
#: document is a few hundred bytes and 10**9 values).
MAX_EXPANDED = 1_000_000


def _items_count(value: object) -> int:
    if isinstance(value, Mapping):
        return 2 * len(value)
    if isinstance(value, list | tuple | set | frozenset):
        return len(value)
    return 0


def check_depth(value: object, *, where: str, max_depth: int = MAX_DEPTH,
                error: type[UnstuckError] = ReadError, max_expanded: int = MAX_EXPANDED) -> None:
    """Refuse ``value`` when its containers nest deeper than ``max_depth``, contain
    themselves, or expand to more than ``max_expanded`` values (YAML aliases repeating one
    container: each use is a copy once serialised).

    Walks without recursion (an explicit stack), visiting each shared container once, so it
    is linear in the number of distinct containers even for YAML aliases that share one
    list many times over.

    Raises:
        error: ``"{where}: nested more than {max_depth} levels deep"``,
            ``"{where}: a value contains itself"`` or ``"{where}: expands to more than
            {max_expanded} values"``.
    """
    if not isinstance(value, Mapping | list | tuple | set | frozenset):
        return
    height: dict[int, int] = {}  # id -> levels of containers at and under it (1 for a flat one)
    expanded: dict[int, int] = {}  # id -> values at and under it, each alias use counted again
    on_path: set[int] = set()
    stack: list[tuple[object, list[object]]] = [(value, _containers(value))]
    on_path.add(id(value))
    while stack:
        node, pending = stack[-1]
        if len(stack) > max_depth:
            raise error(f"{where}: nested more than {max_depth} levels deep")
        if pending:
            child = pending.pop()
            if id(child) in on_path:
                raise error(f"{where}: a value contains itself (a YAML alias inside its own anchor)")
            if id(child) not in height:
                on_path.add(id(child))
                stack.append((child, _containers(child)))
            elif height[id(child)] + len(stack) > max_depth:
                raise error(f"{where}: nested more than {max_depth} levels deep")
            continue
        stack.pop()
        on_path.discard(id(node))
        children = _containers(node)
        below = [height[id(c)] for c in children]
        height[id(node)] = 1 + max(below, default=0)
        if height[id(node)] + len(stack) > max_depth:
            raise error(f"{where}: nested more than {max_depth} levels deep")
        expanded[id(node)] = 1 + _items_count(node) + sum(expanded[id(c)] for c in children)
        if expanded[id(node)] > max_expanded:
            raise error(f"{where}: expands to more than {max_expanded} values (YAML aliases repeating a value)")


def parse_json(text: str | bytes, *, where: str, max_depth: int = MAX_DEPTH,
               error: type[UnstuckError] = ReadError) -> object:
    """One JSON document (RFC 8259), depth-checked.

    Raises:
        error: naming ``where``: not JSON (with the line and column), not UTF-8, a number
            too long to convert, or nested more than ``max_depth`` levels deep.
    """
    try:
        if isinstance(text, bytes):  # decoded as json.loads decodes bytes (RFC 8259 section 8.1; a BOM read)
            text = text.decode(json.detect_encoding(text), "surrogatepass")
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except UnicodeDecodeError as exc:
        raise error(f"{where}: not UTF-8 text (a bad byte at offset {exc.start})") from None
    except RecursionError:
        raise error(f"{where}: nested more than {max_depth} levels deep") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits (sys.int_info)
        raise error(f"{where}: not readable JSON ({exc})") from None
    # check_depth's limits, both from one walk of the tree level by level (unstuck.core.jsonshape.measure):
    # JSON has no aliases, so nothing is shared or contains itself
    depth, count = measure(value, max_depth, loaded=True)
    if depth > max_depth:
        raise error(f"{where}: nested more than {max_depth} levels deep")
    if count > MAX_EXPANDED:
        raise error(f"{where}: expands to more than {MAX_EXPANDED} values")
    return value


def parse_yaml(text: str, *, where: str, max_depth: int = MAX_DEPTH,
               error: type[UnstuckError] = ReadError) -> object:
    """One YAML document, read with PyYAML's safe loader (libyaml's when present), depth-checked.

    Raises:
        error: naming ``where``: not YAML (PyYAML's message, with its line), nested more
            than ``max_depth`` levels deep, or a value that contains itself.
    """
    try:
        value = yaml.load(text, Loader=_SafeLoader)
    except RecursionError:
        raise error(f"{where}: nested more than {max_depth} levels deep") from None
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):
            raise error(f"{where}: nested more than {max_depth} levels deep") from None
        raise error(f"{where}: not valid YAML: {_yaml_problem(exc)}") from None
    check_depth(value, where=where, max_depth=max_depth, error=error)
    return value


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's problem and where it is, ``line L column C: problem (context)``, without its
    ``"<unicode string>"`` stand-in for the file name (the caller names the file)."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return str(exc)
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
    context = f" ({exc.context})" if exc.context else ""
    return f"{where}{exc.problem or 'malformed'}{context}"


def read_text(path: str | Path, *, what: str = "the file", error: type[UnstuckError] = ReadError) -> str:
    """A whole UTF-8 text file.

    Args:
        path: the file.
        what: what the file is, for the message (e.g. ``"the baseline"``).

    Raises:
        error: ``"{path}: cannot read {what}: {reason}"`` when it cannot be read (missing, a
            directory, permission), ``"{path}: not UTF-8 text (byte N …)"`` when it is not
            UTF-8 (N the offset of the first bad byte).
    """
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None


@dataclass(frozen=True, slots=True)
class HeadTail:
    """What :func:`read_head_tail` kept of a stream.

    Attributes:
        head: the first bytes (at most the head size).
        tail: the last bytes after the head (at most the tail size; empty when the stream
            fitted in the head).
        skipped: bytes between the two that were read and dropped (0 when nothing was).
    """

    head: bytes
    tail: bytes
    skipped: int


def read_head_tail(stream: IO[bytes], *, head_bytes: int, tail_bytes: int) -> HeadTail:
    """Read ``stream`` to its end keeping only its first ``head_bytes`` and last ``tail_bytes``.

    Memory stays under ``head_bytes + tail_bytes`` plus one 1 MiB chunk however long the
    stream is; a seekable regular file is not read in the middle at all.

    Raises:
        OSError: from the stream.
    """
    head = stream.read(head_bytes) if head_bytes > 0 else b""
    if len(head) < head_bytes:
        return HeadTail(head, b"", 0)
    try:
        seekable = stream.seekable()
    except (OSError, ValueError):
        seekable = False
    if seekable:
        start = stream.tell()
        end = stream.seek(0, 2)
        stream.seek(max(start, end - tail_bytes))
        tail = stream.read(tail_bytes) if tail_bytes > 0 else b""
        return HeadTail(head, tail, max(0, end - start - len(tail)))
    window = bytearray()
    skipped = 0
    while chunk := stream.read(_CHUNK_BYTES):
        window += chunk
        if len(window) > tail_bytes:
            cut = len(window) - tail_bytes
            skipped += cut
            del window[:cut]
    return HeadTail(head, bytes(window), skipped)


def read_text_window(stream: IO[bytes], *, head_chars: int, tail_chars: int) -> str:
    """A stream as text (UTF-8, bad bytes replaced) of which at least the first
    ``head_chars`` and the last ``tail_chars`` characters are exact; a longer middle is
    replaced by one line ``[… N bytes not read …]``.

    Reads at most 4 bytes per wanted character at either end (UTF-8's longest sequence,
    RFC 3629 section 3), so a cut never falls inside a kept character.

    Raises:
        OSError: from the stream.
    """
    kept = read_head_tail(stream, head_bytes=head_chars * _UTF8_MAX_BYTES,
                          tail_bytes=tail_chars * _UTF8_MAX_BYTES + _UTF8_MAX_BYTES)
    head = kept.head.decode("utf-8", errors="replace")
    if not kept.skipped:
        return (kept.head + kept.tail).decode("utf-8", errors="replace")
    tail = kept.tail.decode("utf-8", errors="replace")
    return f"{head}\n[… {kept.skipped} bytes not read …]\n{tail}"
