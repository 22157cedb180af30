"""``unstuck hooks install|uninstall``: unstuck's hook entries merged into an agent's settings
file as text, so every byte of the user's own settings stays where it was (issue 26, deliver 1).
Internal: not a supported import path (docs/reference/index.md lists those that are).

The three agents keep hooks as ``{"hooks": {EVENT: [GROUP, ...]}}`` (each agent's mapping names
the file and the groups: :meth:`AgentHooks.settings_path`, :meth:`AgentHooks.install_entries`).
The file is read as JSON with the position of every member and item (:func:`parse_spans`: the
values themselves by :meth:`json.JSONDecoder.raw_decode`), and changed by inserting text:

* **install** appends each of unstuck's groups after the last group of its event (the user's
  groups keep their order and come first), adding the event's list, or the ``hooks`` object,
  at the end of its parent when there is none; the new text is indented like its neighbours;
  an install over an earlier one first takes the earlier groups out;
* **uninstall** removes exactly unstuck's groups (:func:`~unstuck.integrations.coding_agents.events.is_own_group`:
  every command in them is the hook client), each with the separator before it, and the lists,
  the ``hooks`` object or the file that install created (as its receipt,
  :class:`Receipts`, recorded) once they are empty again. A file the user's entries were in
  before install is byte for byte what it was.

A file that is not JSON (or, for an agent that allows them, JSON with comments), whose top is
not an object, or whose ``hooks`` or event list is of another type, is left untouched:
:class:`SettingsError` names the file, the line and the column.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unstuck.core.errors import UnstuckError
from unstuck.integrations.coding_agents.events import AgentHooks, HookEntry, is_own_group

__all__ = [
    "Change",
    "Receipts",
    "SettingsError",
    "Span",
    "install_change",
    "own_groups",
    "parse_spans",
    "uninstall_change",
    "write_change",
]


class SettingsError(UnstuckError, ValueError):
    """A settings file unstuck will not change: not JSON, or not the shape hooks live in.

    Attributes:
        path: the file.
        line: the line (1-based) of the fault.
        column: the column (1-based).
    """

    def __init__(self, path: Path, line: int, column: int, problem: str) -> None:
        super().__init__(f"{path}:{line}:{column}: {problem}; the file was left as it is")
        self.path, self.line, self.column = path, line, column


@dataclass
class Span:
    """One JSON value of the text with where it is: ``start``/``end`` (``text[start:end]`` is
    the value), its kind (``object``, ``array`` or ``scalar``), its Python value, and for an
    object its members (key, the key's start, the value), for an array its items."""

    kind: str
    start: int
    end: int
    value: Any = None
    members: list[tuple[str, int, Span]] = field(default_factory=list)
    items: list[Span] = field(default_factory=list)

    def member(self, key: str) -> Span | None:
        """The value of member ``key`` (the last one, as JSON parsers take it), or ``None``."""
        found = [value for name, _, value in self.members if name == key]
        return found[-1] if found else None


class _Parser:
    """JSON (RFC 8259) read with positions; ``//`` and ``/* */`` comments skipped when allowed."""

    def __init__(self, text: str, path: Path, comments: bool) -> None:
        self.text, self.path, self.comments = text, path, comments
        self.decoder = json.JSONDecoder()

    def fail(self, at: int, problem: str) -> SettingsError:
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return SettingsError(self.path, line, column, problem)

    def skip(self, at: int) -> int:
        text = self.text
        while at < len(text):
            if text[at] in " \t\r\n":
                at += 1
            elif self.comments and text.startswith("//", at):
                newline = text.find("\n", at)
                at = len(text) if newline < 0 else newline + 1
            elif self.comments and text.startswith("/*", at):
                close = text.find("*/", at + 2)
                if close < 0:
                    raise self.fail(at, "a comment that never ends")
                at = close + 2
            else:
                break
        return at

    def value(self, at: int, depth: int = 0) -> Span:
        if depth > 100:
            raise self.fail(at, "nested more than 100 deep")
        at = self.skip(at)
        if at >= len(self.text):
            raise self.fail(at, "the text ends where a value should be")
        first = self.text[at]
        if first == "{":
            return self.container(at, "}", depth)
        if first == "[":
            return self.container(at, "]", depth)
        try:
            value, end = self.decoder.raw_decode(self.text, at)
        except json.JSONDecodeError as exc:
            raise self.fail(exc.pos, exc.msg) from None
        return Span("scalar", at, end, value)

    def container(self, start: int, close: str, depth: int) -> Span:
        is_object = close == "}"
        span = Span("object" if is_object else "array", start, start)
        at = self.skip(start + 1)
        values: dict[str, Any] = {}
        items: list[Any] = []
        while True:
            if at < len(self.text) and self.text[at] == close and not (span.members or span.items):
                break
            if is_object:
                if at >= len(self.text) or self.text[at] != '"':
                    raise self.fail(at, "expected a member name in double quotes")
                key, after = self.decoder.raw_decode(self.text, at)
                colon = self.skip(after)
                if colon >= len(self.text) or self.text[colon] != ":":
                    raise self.fail(colon, "expected ':' after a member name")
                child = self.value(colon + 1, depth + 1)
                span.members.append((key, at, child))
                values[key] = child.value
            else:
                child = self.value(at, depth + 1)
                span.items.append(child)
                items.append(child.value)
            at = self.skip(child.end)
            if at < len(self.text) and self.text[at] == ",":
                at = self.skip(at + 1)
                continue
            if at < len(self.text) and self.text[at] == close:
                break
            raise self.fail(at, f"expected ',' or '{close}'")
        span.end = at + 1
        span.value = values if is_object else items
        return span


def parse_spans(text: str, path: Path, *, comments: bool = False) -> Span:
    """The JSON document ``text`` (of the file ``path``, named in errors) with positions.

    Raises:
        SettingsError: the text is not one JSON value (nothing but whitespace, and comments when
            ``comments``, after it).
    """
    parser = _Parser(text, path, comments)
    root = parser.value(0)
    end = parser.skip(root.end)
    if end != len(text):
        raise parser.fail(end, "text after the JSON document")
    return root


def _indent_at(text: str, at: int) -> str:
    """The whitespace that starts the line holding position ``at``."""
    line_start = text.rfind("\n", 0, at) + 1
    stop = line_start
    while stop < len(text) and text[stop] in " \t":
        stop += 1
    return text[line_start:stop]


def _dumped(value: object, indent: str) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)


def _append(text: str, container: Span, piece: object, key: str | None = None) -> tuple[int, int, str]:
    """The edit (start, end, new text) that adds ``piece`` (as member ``key`` of an object, or as
    an array's last item) after the container's last child, indented like it."""
    children = [value for _, _, value in container.members] if container.kind == "object" else container.items
    if children:
        first = container.members[0][1] if container.kind == "object" else children[0].start
        between = text[container.start + 1:first]
        indent = between[between.rfind("\n") + 1:] if "\n" in between else ""
        separator = ",\n" + indent if "\n" in between else ", "
        head = f"{json.dumps(key)}: " if key is not None else ""
        last = children[-1].end
        return last, last, separator + head + _dumped(piece, indent)
    outer = _indent_at(text, container.start)
    indent = outer + "  "
    head = f"{json.dumps(key)}: " if key is not None else ""
    return container.start + 1, container.end - 1, f"\n{indent}{head}{_dumped(piece, indent)}\n{outer}"


def _apply(text: str, edits: Iterable[tuple[int, int, str]]) -> str:
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _remove_child(text: str, container: Span, index: int) -> tuple[int, int, str]:
    """The edit that removes child ``index`` with the separator before it (after it, for the first)."""
    if container.kind == "object":
        starts = [key_start for _, key_start, _ in container.members]
        ends = [value.end for _, _, value in container.members]
    else:
        starts = [item.start for item in container.items]
        ends = [item.end for item in container.items]
    if len(starts) == 1:
        return container.start + 1, container.end - 1, ""
    if index > 0:
        return ends[index - 1], ends[index], ""
    return starts[0], starts[1], ""


@dataclass(frozen=True, slots=True)
class Change:
    """One settings file's change: its text before (``None``: there was no file) and after
    (``None``: remove the file), and one line per thing done."""

    path: Path
    before: str | None
    after: str | None
    done: tuple[str, ...] = ()
    created: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        """The file's text changes."""
        return self.before != self.after

    def diff(self) -> str:
        """The change as a unified diff (``--dry-run``)."""
        return "".join(difflib.unified_diff(
            (self.before or "").splitlines(keepends=True), (self.after or "").splitlines(keepends=True),
            fromfile=f"{self.path} (now)" if self.before is not None else "/dev/null",
            tofile=f"{self.path} (after)" if self.after is not None else "/dev/null"))


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise SettingsError(path, 1, 1, f"not UTF-8 text ({exc.reason})") from None


def _root(text: str, path: Path, comments: bool) -> Span:
    root = parse_spans(text, path, comments=comments)
    if root.kind != "object":
        raise _Parser(text, path, comments).fail(root.start, "the settings are not a JSON object")
    return root


def _hooks_of(text: str, root: Span, path: Path, comments: bool) -> Span | None:
    hooks = root.member("hooks")
    if hooks is not None and hooks.kind != "object":
        raise _Parser(text, path, comments).fail(hooks.start, "'hooks' is not an object")
    return hooks


def own_groups(hooks_mapping: AgentHooks, text: str, path: Path) -> dict[str, int]:
    """How many of unstuck's groups each event of the settings text holds (an event without
    one is not listed).

    Raises:
        SettingsError: as :func:`install_change`.
    """
    comments = bool(getattr(hooks_mapping, "settings_comments", False))
    root = _root(text, path, comments)
    hooks = _hooks_of(text, root, path, comments)
    found: dict[str, int] = {}
    for event, _, groups in hooks.members if hooks is not None else ():
        if groups.kind == "array":
            count = sum(1 for item in groups.items if is_own_group(item.value))
            if count:
                found[event] = count
    return found


def _without_own(text: str, path: Path, comments: bool, created: Sequence[str]) -> tuple[str, list[str]]:
    """``text`` with unstuck's groups removed, then the containers in ``created`` that are empty
    again (deepest first); and a line per removal."""
    done: list[str] = []
    while True:
        root = _root(text, path, comments)
        hooks = _hooks_of(text, root, path, comments)
        edit = None
        for event, _, groups in hooks.members if hooks is not None else ():
            if groups.kind != "array":
                raise _Parser(text, path, comments).fail(groups.start, f"'hooks.{event}' is not a list")
            own = [i for i, item in enumerate(groups.items) if is_own_group(item.value)]
            if own:
                edit = _remove_child(text, groups, own[-1])
                done.append(f"removed unstuck's {event} hook")
                break
        if edit is None:
            break
        text = _apply(text, [edit])
    for name in sorted(created, key=lambda n: n.count("."), reverse=True):
        root = _root(text, path, comments)
        hooks = _hooks_of(text, root, path, comments)
        parent: Span | None = root
        key, target = "hooks", hooks
        if name != "hooks":
            key = name.split(".", 1)[1]
            parent, target = hooks, hooks.member(key) if hooks is not None else None
        if parent is None or target is None or target.value:
            continue
        index = max(i for i, (n, _, _) in enumerate(parent.members) if n == key)
        text = _apply(text, [_remove_child(text, parent, index)])
        done.append(f"removed the empty '{name}' install had added")
    return text, done


def install_change(hooks_mapping: AgentHooks, path: Path, command: str) -> Change:
    """The change that installs ``hooks_mapping``'s groups, each running ``command`` (the hook
    client with its options), into the settings file ``path`` (see the module doc).

    Raises:
        SettingsError: the file is not JSON (with comments, for an agent whose mapping says
            ``settings_comments``), its top is not an object, or ``hooks`` (an event's list) is
            of another type: nothing is changed.
    """
    comments = bool(getattr(hooks_mapping, "settings_comments", False))
    entries: Sequence[HookEntry] = hooks_mapping.install_entries(command)
    before = _read(path)
    text = before if before is not None and before.strip() else "{}\n"
    text, _ = _without_own(text, path, comments, ())
    created: list[str] = []
    done: list[str] = []
    for entry in entries:
        root = _root(text, path, comments)
        hooks = _hooks_of(text, root, path, comments)
        group = dict(entry.group)
        if hooks is None:
            edit = _append(text, root, {entry.event_name: [group]}, "hooks")
            created += ["hooks", f"hooks.{entry.event_name}"]
        else:
            groups = hooks.member(entry.event_name)
            if groups is None:
                edit = _append(text, hooks, [group], entry.event_name)
                created.append(f"hooks.{entry.event_name}")
            elif groups.kind != "array":
                raise _Parser(text, path, comments).fail(groups.start, f"'hooks.{entry.event_name}' is not a list")
            else:
                edit = _append(text, groups, group)
        text = _apply(text, [edit])
        done.append(f"added unstuck's {entry.event_name} hook")
    if not text.endswith("\n"):
        text += "\n"
    return Change(path, before, text, tuple(done), tuple(created) + (("file",) if before is None else ()))


def uninstall_change(hooks_mapping: AgentHooks, path: Path, created: Sequence[str] = ()) -> Change:
    """The change that removes unstuck's groups from ``path``, and what install recorded it had
    created there (``created``: ``"file"``, ``"hooks"``, ``"hooks.EVENT"``) once empty again.

    Raises:
        SettingsError: as :func:`install_change`.
    """
    comments = bool(getattr(hooks_mapping, "settings_comments", False))
    before = _read(path)
    if before is None:
        return Change(path, None, None)
    text, done = _without_own(before, path, comments, [c for c in created if c != "file"])
    after: str | None = text
    if "file" in created and not _root(text, path, comments).members:
        after = None
        done.append("removed the settings file install had made")
    return Change(path, before, after, tuple(done))


def write_change(change: Change) -> None:
    """Write ``change`` (atomically: a temporary file in the same folder renamed over it; the
    file's mode kept, 0600 for a new one), or remove the file when ``after`` is ``None``."""
    if not change.changed:
        return
    if change.after is None:
        with contextlib.suppress(FileNotFoundError):
            change.path.unlink()
        return
    change.path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = change.path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o600
    fd, temporary = tempfile.mkstemp(prefix=f".{change.path.name}.", dir=change.path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(change.after)
        os.chmod(temporary, mode)
        os.replace(temporary, change.path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


class Receipts:
    """What each install created, per settings file (``receipts.json`` in ``folder``), so
    uninstall removes it again: ``{path: {"agent", "created": [...]}}``."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "receipts.json"

    def _all(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def created(self, settings: Path) -> tuple[str, ...]:
        """What install created in ``settings`` (none known: ``()``)."""
        entry = self._all().get(str(settings))
        found = entry.get("created") if isinstance(entry, Mapping) else None
        return tuple(str(c) for c in found) if isinstance(found, list) else ()

    def record(self, settings: Path, agent: str, created: Sequence[str]) -> None:
        """Keep what install created in ``settings`` (added to what an earlier install created)."""
        data = self._all()
        kept = list(dict.fromkeys([*self.created(settings), *created]))
        data[str(settings)] = {"agent": agent, "created": kept}
        self._write(data)

    def forget(self, settings: Path) -> None:
        """Drop ``settings``' record (after uninstall)."""
        data = self._all()
        if data.pop(str(settings), None) is not None:
            self._write(data)

    def _write(self, data: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_change(Change(self.path, None, json.dumps(data, indent=2, sort_keys=True) + "\n"))
