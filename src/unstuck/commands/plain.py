"""Plain command lines, the only form a declared unblock may take: :func:`plain_command_refusal`
says why a command line is not a plain line of simple commands (on top of the command screen,
:func:`unstuck.commands.screen.screen_command`), judged with the table of environment variables
that run or load code or redirect traffic (:func:`variable_rule`,
``unstuck/data/environment_variables.yaml``, each row with its source).
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""


from __future__ import annotations

import enum
import fnmatch
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tree_sitter import Node, Parser

from unstuck.commands.catalogue import string_list, yaml_document
from unstuck.commands.parse import CommandLine, SimpleCommand, bash_language, encode_source, parse_command_line
from unstuck.commands.screen import STARTUP_FILE, TRUST_FILE, home_path, written_files
from unstuck.core.cache import bundled_document
from unstuck.core.text import valid_utf8

__all__ = [
    "VariableEffect",
    "VariableRule",
    "plain_command_refusal",
    "variable_rule",
]

# ---------------------------------------------------------------------------------------------
# plain command lines: what an unblock may be
# ---------------------------------------------------------------------------------------------


class VariableEffect(enum.StrEnum):
    """What an environment variable of ``unstuck/data/environment_variables.yaml`` does:
    ``runs`` (its value is a command or code, or names a file or folder of code, a program
    runs), ``loads`` (it names where a program loads code or options from) or ``redirects``
    (it sends a program's traffic elsewhere or changes which certificates it trusts)."""

    RUNS = "runs"
    LOADS = "loads"
    REDIRECTS = "redirects"


@dataclass(frozen=True, slots=True)
class VariableRule:
    """One row of the variables table: the names it covers (shell glob patterns, matched case
    sensitively), its :class:`VariableEffect`, what the variable makes a program do, and the
    manual or documentation that says so."""

    names: tuple[str, ...]
    effect: VariableEffect
    what: str
    source: str


@dataclass(frozen=True, slots=True)
class _OptionRule:
    programs: frozenset[str]
    options: tuple[str, ...]
    source: str


_VARIABLES_FILE = "unstuck/data/environment_variables.yaml"


def _variables_document(text: str) -> Any:
    return yaml_document(text, _VARIABLES_FILE)


@functools.cache
def _variable_tables() -> tuple[tuple[VariableRule, ...], tuple[_OptionRule, ...]]:
    """The bundled variables and options tables, validated (a malformed row is a ``ValueError``
    naming the file and the row)."""
    document = bundled_document("environment_variables.yaml", _variables_document)
    if not isinstance(document, Mapping) or set(document) != {"variables", "options"}:
        raise ValueError(f"{_VARIABLES_FILE}: must be a mapping with 'variables' and 'options' lists")
    rules: list[VariableRule] = []
    for index, raw in enumerate(document["variables"]):
        where = f"{_VARIABLES_FILE}: variables row {index + 1}"
        if not isinstance(raw, Mapping) or set(raw) != {"names", "effect", "what", "source"}:
            raise ValueError(f"{where}: must have exactly names, effect, what and source")
        try:
            effect = VariableEffect(raw["effect"])
        except ValueError:
            raise ValueError(f"{where}: effect must be one of {', '.join(VariableEffect)}") from None
        rules.append(VariableRule(string_list(raw["names"], where, "names"), effect, str(raw["what"]),
                                  str(raw["source"])))
    options: list[_OptionRule] = []
    for index, raw in enumerate(document["options"]):
        where = f"{_VARIABLES_FILE}: options row {index + 1}"
        if not isinstance(raw, Mapping) or set(raw) != {"programs", "options", "source"}:
            raise ValueError(f"{where}: must have exactly programs, options and source")
        options.append(_OptionRule(frozenset(string_list(raw["programs"], where, "programs")),
                                   string_list(raw["options"], where, "options"), str(raw["source"])))
    return tuple(rules), tuple(options)


@functools.lru_cache(maxsize=1024)
def variable_rule(name: str) -> VariableRule | None:
    """The first row of ``unstuck/data/environment_variables.yaml`` whose names match the
    environment variable ``name`` (``BASH_ENV``, ``LD_PRELOAD``, ``HTTPS_PROXY``,
    ``OPENAI_BASE_URL`` …), or ``None`` for a variable that decides neither what code runs nor
    where traffic goes (``AWS_PROFILE``, ``PATH``: a ``PATH`` that puts a world-writable folder
    first is :func:`screen_command`'s to refuse)."""
    return next((rule for rule in _variable_tables()[0] if any(fnmatch.fnmatchcase(name, p) for p in rule.names)),
                None)


def _redirecting_option(command: SimpleCommand) -> tuple[str, _OptionRule] | None:
    """An option of the options table the command gives its installer (``pip install
    --index-url …``; also ``python -m pip``, ``uv pip``), and its row."""
    words = list(command.args)
    programs = {(command.program or "").lower()}
    if words[:1] == ["-m"] and len(words) > 1:
        programs.add(words[1].lower())
    programs.update(w.lower() for w in words[:2] if not w.startswith("-"))  # uv pip install, python3 -m pip
    for rule in _variable_tables()[1]:
        if not programs & rule.programs:
            continue
        for word in words:
            for option in rule.options:
                long = option.startswith("--")
                if word == option or (long and word.startswith(option + "=")) or (
                        not long and word.startswith(option) and len(word) > len(option) and word[1] != "-"):
                    return option, rule
    return None


#: Nodes of tree-sitter's bash grammar a plain command line does not hold, and why: command and
#: process substitution (bash(1) EXPANSION: Command Substitution, Process Substitution),
#: compound commands and functions (SHELL GRAMMAR: Compound Commands, Shell Function
#: Definitions), here-documents and here-strings (REDIRECTION).
_NOT_PLAIN = {
    "command_substitution": "it runs a command substitution ($(…) or backticks)",
    "process_substitution": "it runs a process substitution (<(…) or >(…))",
    "subshell": "it is a compound command (a subshell)",
    "compound_statement": "it is a compound command (a { …; } group)",
    "if_statement": "it is a compound command (if)",
    "while_statement": "it is a compound command (while or until)",
    "for_statement": "it is a compound command (for or select)",
    "c_style_for_statement": "it is a compound command (for)",
    "case_statement": "it is a compound command (case)",
    "function_definition": "it defines a function",
    "heredoc_redirect": "it feeds a here-document to a command",
    "herestring_redirect": "it feeds a here-string to a command",
}
#: How :func:`plain_command_refusal` says what a variable's effect is.
_EFFECT_WORDS = {VariableEffect.RUNS: "makes a program run code", VariableEffect.LOADS: "makes a program load code",
                 VariableEffect.REDIRECTS: "sends traffic elsewhere or changes whom it trusts"}
#: Redirections that only join or close descriptors (``2>&1``, ``>&2``, ``2>&-``): no file or device.
_DUPLICATIONS = frozenset({">&", "<&", ">&-", "<&-"})
#: Builtins that set code to run later, or load it (bash(1) SHELL BUILTIN COMMANDS: alias, trap,
#: complete -C, bind -x, enable -f loads a builtin from a shared object).
_DEFERS_CODE = frozenset({"alias", "trap", "complete", "bind", "enable"})
#: Builtins whose arguments set shell variables (bash(1) SHELL BUILTIN COMMANDS).
_DECLARES = frozenset({"export", "declare", "typeset", "readonly", "local"})
#: In-place editors (sed(1) ``-i``/``--in-place``, perlrun(1) ``-i``): their file operands are written.
_IN_PLACE = {"sed": ("-i", "--in-place"), "gsed": ("-i", "--in-place"), "perl": ("-i", "-pi")}


def _redirect_refusal(node: Node) -> str | None:
    operator = next((child.type for child in node.children if not child.is_named), "")
    destination = [child for child in node.children if child.is_named and child.type != "file_descriptor"]
    if operator in _DUPLICATIONS and all(child.type == "number" for child in destination):
        return None
    return "it redirects to or from a file or device"


def _node_refusal(root: Node) -> str | None:
    stack = [root]
    while stack:
        node = stack.pop()
        why = _NOT_PLAIN.get(node.type)
        if why is not None:
            return why
        if node.type == "file_redirect":
            why = _redirect_refusal(node)
            if why is not None:
                return why
        stack.extend(reversed(node.children))
    return None


def _set_variables(line: CommandLine) -> Iterator[str]:
    """The names of the variables the line sets: bare assignments, ``export``/``declare`` …
    arguments (with or without a value), prefix assignments and ``env NAME=value``."""
    yield from (name for name, _ in line.assignments)
    for command in line.commands:
        yield from (name for name, _ in command.environment)
        if command.program in _DECLARES:
            yield from (arg.split("=", 1)[0] for arg in command.args if not arg.startswith(("-", "+")))


def _writes_startup_file(command: SimpleCommand) -> str | None:
    files = written_files(command)
    flags = _IN_PLACE.get((command.program or "").lower())
    if flags is not None and any(a.startswith(flags) for a in command.args):
        files += [home_path(a) for a in command.args if not a.startswith("-")]
    return next((f for f in files if STARTUP_FILE.search(f) or TRUST_FILE.search(f)), None)


def plain_command_refusal(command: str) -> str | None:
    """Why ``command`` is not a plain command line of simple commands, or ``None`` when it is:
    what a declared unblock may be before it is shown as "Run: …" or remembered
    (:func:`unstuck.recognise.instructions.screen_instruction`), on top of :func:`screen_command`.

    A plain command line is simple commands joined by pipes and ``&&``/``||``/``;`` in which:

    * nothing runs a command's output as words or a file (no ``$(…)``, backticks, ``<(…)``,
      ``>(…)``), nothing is a compound command or a function, and no command runs a command
      line from a string (``bash -c``, ``eval``, ``su -c``);
    * nothing is redirected to or from a file or a device (``> f``, ``< /dev/tcp/…``,
      ``&> f``), no here-document or here-string is fed in; joining or closing descriptors
      (``2>&1``) is plain;
    * no shell start-up file (``~/.bashrc``, ``/etc/profile.d/``) or file that grants access is
      written (by ``tee``, ``cp``, ``sed -i`` …), and no alias, trap, completion or key binding
      is set to run later;
    * no variable of ``unstuck/data/environment_variables.yaml`` is set or exported
      (:func:`variable_rule`: proxies, package indexes, ``*_BASE_URL``, ``LD_*``, ``PYTHON*``,
      ``BASH_ENV``, ``GIT_SSH_COMMAND`` …), and no installer is given an option of its options
      table (``pip install --index-url …``, ``npm install --registry …``).

    The line is read by tree-sitter's bash grammar (:func:`parse_command_line`). Never raises.
    """
    text = valid_utf8(command)
    line = parse_command_line(text)
    if not line.complete or not line.commands:
        return "it does not parse as a shell command"
    why = _node_refusal(Parser(bash_language()).parse(encode_source(text)).root_node)
    if why is not None:
        return why
    for name in _set_variables(line):
        rule = variable_rule(name)
        if rule is not None:
            return f"it sets {name}, a variable that {_EFFECT_WORDS[rule.effect]} ({rule.what})"
    for simple in line.commands:
        if simple.depth > 0 or simple.script is not None:
            return "it runs a command line from a string (bash -c, eval, su -c …)"
        if simple.program in _DEFERS_CODE:
            return f"it sets code to run later ({simple.program})"
        written = _writes_startup_file(simple)
        if written is not None:
            return f"it writes {written}, a file that runs or grants access"
        found = _redirecting_option(simple)
        if found is not None:
            return f"it gives its installer {found[0]}, which points it at another package index, proxy or host"
    return None

