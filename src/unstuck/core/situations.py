"""The situation vocabulary: what a tool result means for the agent loop.

The closed taxonomy (DESIGN.md, "The situation taxonomy"; seed 000 section 3.1)::

    Situation
    ├── blocker        needs the user; opens on a subject
    │   ├── auth             logged out, bad or expired credentials
    │   ├── permission       refused by a permission tier, EACCES, policy
    │   ├── not_installed    the program is missing
    │   └── quota            spent, not retryable (a credit balance)
    ├── transient      waiting can fix it
    │   ├── timeout
    │   ├── unavailable      5xx, server down or not listening (connection refused)
    │   ├── network          DNS failure, unreachable, reset (a refused connection: unavailable)
    │   └── quota            rate limited, retryable (with a reset)
    ├── self_fixable   the agent can correct its own plan
    │   ├── not_found
    │   ├── invalid_args
    │   ├── conflict
    │   └── execution_error
    ├── degenerate     the call "worked" but the result is unusable
    │   ├── empty
    │   └── truncated
    └── adversarial
        └── injected_instruction

``quota`` is the one kind in two classes: retryable (a rate limit with a reset) it is
transient; not retryable (a spent balance) it is a blocker.

A *declared* situation comes from the tool's own code and may carry ``unblock`` (the exact
action for the user) and ``probe`` (a cheap read-only call that says whether the situation
still holds). An *inferred* situation comes from :mod:`unstuck.recognise.classify` and never carries
either (seed 000 section 3.2).
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from unstuck.core.records import cheap

__all__ = [
    "Kind",
    "KindClass",
    "Probe",
    "Situation",
    "Source",
    "class_of",
    "validate_situation",
]


class Kind(enum.StrEnum):
    """One word of the closed kind vocabulary (DESIGN.md)."""

    AUTH = "auth"
    PERMISSION = "permission"
    NOT_INSTALLED = "not_installed"
    QUOTA = "quota"
    TIMEOUT = "timeout"
    UNAVAILABLE = "unavailable"
    NETWORK = "network"
    NOT_FOUND = "not_found"
    INVALID_ARGS = "invalid_args"
    CONFLICT = "conflict"
    EXECUTION_ERROR = "execution_error"
    EMPTY = "empty"
    TRUNCATED = "truncated"
    INJECTED_INSTRUCTION = "injected_instruction"


class KindClass(enum.StrEnum):
    """The five classes a kind falls into."""

    BLOCKER = "blocker"
    TRANSIENT = "transient"
    SELF_FIXABLE = "self_fixable"
    DEGENERATE = "degenerate"
    ADVERSARIAL = "adversarial"


class Source(enum.StrEnum):
    """Who said what the result means: the tool itself, the classifier, or unstuck's own
    refusal of a call (which says what this run may do, never what the machine is: a refusal
    never replaces a blocker a tool reported, and a tool can never declare one)."""

    DECLARED = "declared"
    INFERRED = "inferred"
    UNSTUCK = "unstuck"


# The class of each kind; quota's class depends on the retryable flag (see Situation.kind_class).
_CLASS_OF_KIND: Mapping[Kind, KindClass] = {
    Kind.AUTH: KindClass.BLOCKER,
    Kind.PERMISSION: KindClass.BLOCKER,
    Kind.NOT_INSTALLED: KindClass.BLOCKER,
    Kind.QUOTA: KindClass.BLOCKER,
    Kind.TIMEOUT: KindClass.TRANSIENT,
    Kind.UNAVAILABLE: KindClass.TRANSIENT,
    Kind.NETWORK: KindClass.TRANSIENT,
    Kind.NOT_FOUND: KindClass.SELF_FIXABLE,
    Kind.INVALID_ARGS: KindClass.SELF_FIXABLE,
    Kind.CONFLICT: KindClass.SELF_FIXABLE,
    Kind.EXECUTION_ERROR: KindClass.SELF_FIXABLE,
    Kind.EMPTY: KindClass.DEGENERATE,
    Kind.TRUNCATED: KindClass.DEGENERATE,
    Kind.INJECTED_INSTRUCTION: KindClass.ADVERSARIAL,
}


def class_of(kind: Kind) -> KindClass:
    """The class of ``kind`` in DESIGN.md's taxonomy (blocker, transient, self-fixable,
    degenerate, adversarial). A quota's class is blocker here; a quota that is retryable
    (a rate limit with a reset) is transient in a :class:`Situation`."""
    return _CLASS_OF_KIND[kind]


@dataclass(frozen=True, slots=True)
class Probe:
    """A cheap read-only tool call that says whether a situation still holds.

    ``tool`` names a registered tool; ``arguments_json`` is its arguments as canonical JSON
    (sorted keys), so a probe is hashable and comparable. Build one with :meth:`of`.
    A probe is *clean* when its result carries no situation.
    """

    tool: str
    arguments_json: str = "{}"

    @classmethod
    def of(cls, tool: str, arguments: Mapping[str, Any] | None = None) -> Probe:
        """Build a probe calling ``tool`` with ``arguments`` (JSON-serialisable values)."""
        return cls(tool, json.dumps(dict(arguments or {}), sort_keys=True))

    @property
    def arguments(self) -> dict[str, Any]:
        """The probe's arguments as a fresh dict."""
        loaded: dict[str, Any] = json.loads(self.arguments_json)
        return loaded


@cheap
@dataclass(frozen=True, slots=True)
class Situation:
    """What one tool result means for the loop.

    Attributes:
        kind: one word of the closed vocabulary.
        subject: what is affected: a program (``"gh"``), a path, a host. Never empty.
        interactive: the remedy needs a person at a keyboard (browser sign-in, 2FA, approval).
        retryable: waiting and repeating the same call can succeed.
        retry_after_s: seconds to wait before a retry, when the source said so.
        unblock: the exact command or action for the user (declared situations only).
        probe: the call that re-checks this situation (declared situations only).
        source: declared by the tool, or inferred by the classifier.
        detail: a short human-readable excerpt of the evidence.
        suggestion: the command the tool's own output says fixes it ("please run: gh auth
            login"), screened (:func:`unstuck.commands.screen.screen_command`); quoted to the user as what
            the tool said, never as unstuck's instruction, and never stored in a lesson.
        location: for ``not_installed``, the absolute path where an executable of that name
            was found on disk outside ``PATH`` (so the fix is "add its directory to PATH",
            not "install it"); ``None`` when none was found or nobody looked.
    """

    kind: Kind
    subject: str
    interactive: bool = False
    retryable: bool = False
    retry_after_s: float | None = None
    unblock: str | None = None
    probe: Probe | None = None
    source: Source = Source.DECLARED
    detail: str = field(default="", compare=False)
    suggestion: str | None = field(default=None, compare=False)
    location: str | None = field(default=None, compare=False)

    @property
    def kind_class(self) -> KindClass:
        """The class of this situation; a retryable quota is transient, otherwise a blocker."""
        if self.kind is Kind.QUOTA and self.retryable:
            return KindClass.TRANSIENT
        return _CLASS_OF_KIND[self.kind]

    @property
    def is_blocker(self) -> bool:
        """True when the situation needs the user (auth, permission, not_installed, spent quota)."""
        return self.kind_class is KindClass.BLOCKER

    @property
    def is_declared(self) -> bool:
        """True when the tool's own code returned this situation."""
        return self.source is Source.DECLARED

    @property
    def is_refusal(self) -> bool:
        """True when this is unstuck's own refusal of a call, not what a tool reported."""
        return self.source is Source.UNSTUCK

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :func:`validate_situation` reads it back."""
        return {
            "kind": self.kind.value,
            "subject": self.subject,
            "interactive": self.interactive,
            "retryable": self.retryable,
            "retry_after_s": self.retry_after_s,
            "unblock": self.unblock,
            "probe": (
                None
                if self.probe is None
                else {"tool": self.probe.tool, "args": self.probe.arguments}
            ),
            "source": self.source.value,
            "detail": self.detail,
            "suggestion": self.suggestion,
            "location": self.location,
        }


_KNOWN_FIELDS = frozenset(
    {"kind", "subject", "interactive", "retryable", "retry_after_s", "unblock", "probe",
     "source", "detail", "suggestion", "location"}
)


def _finite(seconds: object) -> bool:
    return seconds is None or (isinstance(seconds, int | float) and math.isfinite(seconds))


def _fail(tool_name: str, problem: str) -> ValueError:
    return ValueError(f"tool {tool_name!r} returned a malformed situation: {problem}")


def _parse_probe(tool_name: str, raw: object) -> Probe | None:
    if raw is None or isinstance(raw, Probe):
        return raw
    if isinstance(raw, str):
        if not raw.strip():
            raise _fail(tool_name, "probe is an empty string")
        return Probe.of(raw)
    if isinstance(raw, Mapping):
        name = raw.get("tool")
        args = raw.get("args", raw.get("arguments", {}))
        if not isinstance(name, str) or not name:
            raise _fail(tool_name, "probe has no 'tool' name")
        if not isinstance(args, Mapping):
            raise _fail(tool_name, f"probe arguments must be a mapping, got {type(args).__name__}")
        try:
            return Probe.of(name, args)
        except TypeError as exc:
            raise _fail(tool_name, f"probe arguments are not JSON-serialisable ({exc})") from exc
    raise _fail(tool_name, f"probe must be a tool name or {{tool, args}}, got {type(raw).__name__}")


def _check(tool_name: str, situation: Situation) -> Situation:
    if not isinstance(situation.subject, str) or not situation.subject.strip():
        raise _fail(tool_name, "missing subject")
    if situation.source is Source.INFERRED and situation.unblock is not None:
        raise _fail(tool_name, "an inferred situation carries an unblock")
    if situation.source is Source.INFERRED and situation.probe is not None:
        raise _fail(tool_name, "an inferred situation carries a probe")
    if situation.retry_after_s is not None and situation.retry_after_s < 0:
        raise _fail(tool_name, f"retry_after_s is negative ({situation.retry_after_s})")
    return situation


def validate_situation(tool_name: str, value: object, *, allow_refusal: bool = False) -> Situation | None:
    """Check and normalise a situation a tool returned; the loop calls it on every result.

    Args:
        tool_name: the tool that produced ``value``, named in every error.
        value: ``None`` (no situation), a :class:`Situation`, or a mapping with the fields of
            :class:`Situation` (``kind`` and ``subject`` required; ``source`` defaults to
            ``"declared"``; ``probe`` is a tool name or ``{"tool": ..., "args": {...}}``).

    Returns:
        The validated situation, or ``None`` when ``value`` is ``None``.

    Raises:
        ValueError: naming the tool, for an unknown kind, a missing or empty subject, an
            unknown field, an inferred situation carrying an unblock or a probe, a tool
            claiming unstuck's own source (``"unstuck"``) unless ``allow_refusal`` (a record
            unstuck wrote itself, read back), or a value of the wrong type. A malformed
            declaration is a bug in that tool (seed 000 §3.2).
    """
    if value is None:
        return None
    if isinstance(value, Situation):
        if value.source is Source.UNSTUCK and not allow_refusal:
            raise _fail(tool_name, "only unstuck's own refusals carry source 'unstuck'")
        if isinstance(value.kind, Kind) and isinstance(value.source, Source) and _finite(value.retry_after_s):
            return _check(tool_name, value)
        value = {name: getattr(value, name) for name in _KNOWN_FIELDS}  # re-read every field
    if not isinstance(value, Mapping):
        raise _fail(tool_name, f"expected a mapping or Situation, got {type(value).__name__}")
    unknown = sorted(set(map(str, value)) - _KNOWN_FIELDS)
    if unknown:
        raise _fail(tool_name, f"unknown field(s) {', '.join(unknown)}")
    raw_kind = value.get("kind")
    raw_kind = raw_kind.value if isinstance(raw_kind, Kind) else raw_kind
    try:
        kind = Kind(raw_kind if isinstance(raw_kind, str) else repr(raw_kind))
    except ValueError:
        raise _fail(tool_name, f"unknown kind {raw_kind!r}") from None
    raw_source = value.get("source", Source.DECLARED.value)
    raw_source = raw_source.value if isinstance(raw_source, Source) else raw_source
    try:
        source = Source(raw_source)
    except ValueError:
        raise _fail(tool_name, f"unknown source {raw_source!r}") from None
    if source is Source.UNSTUCK and not allow_refusal:
        raise _fail(tool_name, "only unstuck's own refusals carry source 'unstuck'")
    subject = value.get("subject")
    if not isinstance(subject, str):
        raise _fail(tool_name, "missing subject")
    unblock = value.get("unblock")
    if unblock is not None and not isinstance(unblock, str):
        raise _fail(tool_name, f"unblock must be a string, got {type(unblock).__name__}")
    retry_after = value.get("retry_after_s")
    if retry_after is not None and (
        isinstance(retry_after, bool) or not isinstance(retry_after, int | float) or not _finite(retry_after)
    ):
        raise _fail(tool_name, f"retry_after_s must be a number of seconds, got {retry_after!r}")
    for flag in ("interactive", "retryable"):
        if not isinstance(value.get(flag, False), bool):
            raise _fail(tool_name, f"{flag} must be true or false, got {value.get(flag)!r}")
    detail = value.get("detail", "")
    suggestion = value.get("suggestion")
    if suggestion is not None and not isinstance(suggestion, str):
        raise _fail(tool_name, f"suggestion must be a string, got {type(suggestion).__name__}")
    location = value.get("location")
    if location is not None and not isinstance(location, str):
        raise _fail(tool_name, f"location must be a path string, got {type(location).__name__}")
    situation = Situation(
        kind=kind,
        subject=subject,
        interactive=bool(value.get("interactive", False)),
        retryable=bool(value.get("retryable", False)),
        retry_after_s=None if retry_after is None else float(retry_after),
        unblock=unblock,
        probe=_parse_probe(tool_name, value.get("probe")),
        source=source,
        detail=detail if isinstance(detail, str) else str(detail),
        suggestion=suggestion,
        location=location,
    )
    return _check(tool_name, situation)
