"""The environment record: an environment's recovery rules ("when P, do A") with what they are
about, kept as one data file (seed 003, "Why the Extracted Rule Belongs to an Environment").

A :class:`Rule` is "when P, do A" as data: a structured :class:`Trigger` (a pattern over the
trace: the moment, the tool, the situation kind, the argument) and a :class:`RuleAction` (what
to do instead, naming the environment's own tools), with the sentence a model reads. Scripted
agents apply a rule only by matching its stored trigger against their own trace; models get the
sentences as a prompt section (:func:`rules_prompt`), each screened first: a record is a data
file anyone can edit or share, so a rule's text reaches a prompt only as one plain sentence
with no instruction markers (:func:`withheld_rules`; issue 23, deliver 4).

An :class:`EnvironmentRecord` is an environment's record ``(description and objects, tools,
bad patterns, rules)``, versioned and stored as one JSON data file
(:func:`save_record` / :func:`load_record`). A rule belongs to the environment it was mined in:
nothing carries it to another one.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from unstuck.core.output import write_json
from unstuck.mining.environment import BusinessObject, MiningError
from unstuck.mining.trace import BadPattern
from unstuck.recognise.instructions import Use, screen_instruction

__all__ = [
    "RECORDS_ENV",
    "RECORD_SCHEMA",
    "ActionKind",
    "BadPatternCount",
    "EnvironmentRecord",
    "Moment",
    "Rule",
    "RuleAction",
    "RuleEffect",
    "Trigger",
    "default_records_dir",
    "load_record",
    "record_path",
    "rules_prompt",
    "save_record",
    "withheld_rules",
]

#: The version of the record file's format; a file of another version is refused.
RECORD_SCHEMA = 1


class Moment(enum.StrEnum):
    """When a trigger is checked: before a call to its tool, after its tool's result, or
    before the final answer."""

    BEFORE_CALL = "before_call"
    AFTER_RESULT = "after_result"
    BEFORE_ANSWER = "before_answer"


class ActionKind(enum.StrEnum):
    """What a rule makes the agent do.

    * ``look_up``: call ``tool`` first and take the identifier from its result;
    * ``read_back``: call ``tool`` to see whether the write took effect before writing again
      or answering;
    * ``retry``: call again (the failure is one that waiting fixes);
    * ``ask``: ask the user (``ask_user``), naming what is blocked, instead of working around it;
    * ``change_call``: do not repeat the failed call unchanged.
    """

    LOOK_UP = "look_up"
    READ_BACK = "read_back"
    RETRY = "retry"
    ASK = "ask"
    CHANGE_CALL = "change_call"


@dataclass(frozen=True, slots=True)
class Trigger:
    """A pattern over an agent's own trace. ``tool``: the tool called (or about to be);
    ``kind``: the situation kind of its result (``None``: any failure, for ``after_result``;
    ignored before a call); ``argument``: an identifier argument whose value no earlier
    result showed (``None``: any)."""

    moment: Moment
    tool: str
    kind: str | None = None
    argument: str | None = None


@dataclass(frozen=True, slots=True)
class RuleAction:
    """What to do when the trigger matches; ``tool`` names the environment's tool to call
    (``None`` for ``retry`` and ``change_call``)."""

    kind: ActionKind
    tool: str | None = None


@dataclass(frozen=True, slots=True)
class RuleEffect:
    """A rule as an intervention on held-out tasks, same tasks, same seeds: rollouts that
    failed without it and succeeded with it (``fixed``), the reverse (``broke``), and the
    rollouts compared (``runs``). It is kept only when it fixes more than it breaks."""

    fixed: int
    broke: int
    runs: int

    @property
    def kept(self) -> bool:
        """Fixes more than it breaks."""
        return self.fixed > self.broke


@dataclass(frozen=True, slots=True)
class Rule:
    """"When P, do A": ``id`` (unique in its record), ``pattern`` (the bad pattern it answers),
    ``trigger`` and ``action`` (structured), ``text`` (the sentence, naming the environment's
    tools and objects), ``support`` (contrast pairs it came from), ``enabled`` (``unstuck
    rules disable`` turns it off), ``effect`` (as an intervention, once measured)."""

    id: str
    pattern: BadPattern
    trigger: Trigger
    action: RuleAction
    text: str
    support: int
    enabled: bool = True
    effect: RuleEffect | None = None


@dataclass(frozen=True, slots=True)
class BadPatternCount:
    """How often the analyzer diagnosed ``pattern`` first at a call to ``tool`` in agreed
    failed rollouts."""

    pattern: BadPattern
    tool: str
    count: int


@dataclass(frozen=True, slots=True)
class EnvironmentRecord:
    """An environment's record: ``environment`` and its ``version``, ``description``,
    ``objects``, ``tools``, observed ``bad_patterns`` and mined ``rules``, plus what the mining
    run measured (``stats``: name to number, e.g. agreement and discard rate)."""

    environment: str
    version: int
    description: str
    objects: tuple[BusinessObject, ...]
    tools: tuple[str, ...]
    bad_patterns: tuple[BadPatternCount, ...] = ()
    rules: tuple[Rule, ...] = ()
    stats: tuple[tuple[str, float], ...] = field(default=())

    def enabled_rules(self) -> tuple[Rule, ...]:
        """The rules in force."""
        return tuple(rule for rule in self.rules if rule.enabled)

    def rule(self, rule_id: str) -> Rule:
        """The rule ``rule_id``.

        Raises:
            MiningError: naming the ids there are.
        """
        found = next((rule for rule in self.rules if rule.id == rule_id), None)
        if found is None:
            known = ", ".join(rule.id for rule in self.rules) or "none"
            raise MiningError(f"environment {self.environment!r} has no rule {rule_id!r}; its rules: {known}")
        return found

    def with_rule(self, updated: Rule) -> EnvironmentRecord:
        """This record with ``updated`` in place of the rule of the same id."""
        self.rule(updated.id)
        return replace(self, rules=tuple(updated if rule.id == updated.id else rule for rule in self.rules))


#: The variable that moves the folder of environment records.
RECORDS_ENV = "UNSTUCK_RECORDS_DIR"


def default_records_dir() -> Path:
    """Where environment records live: ``UNSTUCK_RECORDS_DIR`` when set, else
    ``environments`` in the user data directory (``platformdirs.user_data_path("unstuck")``)."""
    import platformdirs

    chosen = os.environ.get(RECORDS_ENV)
    return Path(chosen) if chosen else platformdirs.user_data_path("unstuck") / "environments"


def record_path(environment: str, folder: Path | None = None) -> Path:
    """The record file of ``environment``: ``ENV.json`` in ``folder`` (default
    :func:`default_records_dir`).

    Raises:
        MiningError: for a name that is not a word of letters, digits, ``_`` and ``-`` (a
            path such as ``../x`` would leave the folder).
    """
    if not environment or not all(c.isalnum() or c in "_-" for c in environment):
        raise MiningError(f"environment name {environment!r}: use letters, digits, _ and -")
    return (folder if folder is not None else default_records_dir()) / f"{environment}.json"


def withheld_rules(rules: Sequence[Rule]) -> tuple[tuple[Rule, str], ...]:
    """The enabled rules whose text may not reach a prompt, each with why: a rule's text is
    accepted only as one plain sentence of at most
    :data:`unstuck.recognise.instructions.SENTENCE_MAX_CHARS` characters with no instruction markers
    (:func:`unstuck.recognise.instructions.screen_instruction`: an injected instruction, a
    download-and-run, hidden characters, escape sequences, two sentences or a line break
    withhold it)."""
    withheld: list[tuple[Rule, str]] = []
    for rule in rules:
        if not rule.enabled:
            continue
        screened = screen_instruction(rule.text)
        if screened.use is not Use.SENTENCE:
            withheld.append((rule, screened.reason or "it is a command, not a sentence"))
    return tuple(withheld)


def rules_prompt(rules: Sequence[Rule], environment: str) -> str:
    """The prompt section that gives a model the rules in force: a heading naming the
    environment, then one line per enabled rule whose text passes the screen (the others are
    left out: :func:`withheld_rules`). Empty when none is left."""
    withheld = {id(rule) for rule, _ in withheld_rules(rules)}
    lines = [f"- {rule.text.strip()}" for rule in rules if rule.enabled and id(rule) not in withheld]
    if not lines:
        return ""
    return f"Recovery rules learned in the {environment} environment:\n" + "\n".join(lines)


# -- the data file ---------------------------------------------------------------------------------

def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"enabled must be true or false, got {value!r}")
    return value


def _rule_from(where: str, data: Mapping[str, Any]) -> Rule:
    try:
        trigger, action = data["trigger"], data["action"]
        effect = data.get("effect")
        return Rule(
            id=str(data["id"]), pattern=BadPattern(data["pattern"]),
            trigger=Trigger(Moment(trigger["moment"]), str(trigger["tool"]), trigger.get("kind"),
                            trigger.get("argument")),
            action=RuleAction(ActionKind(action["kind"]), action.get("tool")),
            text=str(data["text"]), support=int(data["support"]), enabled=_flag(data.get("enabled", True)),
            effect=None if effect is None else RuleEffect(int(effect["fixed"]), int(effect["broke"]),
                                                          int(effect["runs"])),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MiningError(f"{where}: malformed rule ({type(exc).__name__}: {exc})") from exc


def load_record(path: Path) -> EnvironmentRecord:
    """Read an environment record file.

    Raises:
        MiningError: for a missing, unreadable or malformed file, or one of another schema
            version, naming the file and what is wrong.
    """
    from unstuck.core.readers import parse_json, read_text

    data = parse_json(read_text(path, what="the environment record", error=MiningError), where=str(path),
                      error=MiningError)
    if not isinstance(data, Mapping):
        raise MiningError(f"{path}: an environment record is a JSON object")
    if data.get("schema") != RECORD_SCHEMA:
        raise MiningError(f"{path}: record schema {data.get('schema')!r}; this unstuck reads schema {RECORD_SCHEMA}")
    try:
        rules = tuple(_rule_from(f"{path}: rules[{i}]", r) for i, r in enumerate(data.get("rules", [])))
        return EnvironmentRecord(
            environment=str(data["environment"]), version=int(data["version"]), description=str(data["description"]),
            objects=tuple(BusinessObject(str(o["name"]), str(o["identifier"]), str(o["description"]))
                          for o in data.get("objects", [])),
            tools=tuple(str(t) for t in data.get("tools", [])),
            bad_patterns=tuple(BadPatternCount(BadPattern(b["pattern"]), str(b["tool"]), int(b["count"]))
                               for b in data.get("bad_patterns", [])),
            rules=rules,
            stats=tuple((str(k), float(v)) for k, v in dict(data.get("stats", {})).items()),
        )
    except MiningError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise MiningError(f"{path}: malformed environment record ({type(exc).__name__}: {exc})") from exc


def save_record(record: EnvironmentRecord, path: Path) -> None:
    """Write ``record`` as JSON (UTF-8) to ``path``, atomically (a temporary file renamed over
    it), so a crash leaves the old record or the new one, never half of one."""
    document = {"schema": RECORD_SCHEMA, **asdict(record), "stats": dict(record.stats)}
    write_json(path, document)  # redacted, as every file unstuck writes (unstuck.core.output)
