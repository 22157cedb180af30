"""What a tool's text may become: one of unstuck's instructions, or only quoted evidence
(DESIGN.md: tool text never becomes an instruction of unstuck's; issue 23, deliver 4).

Text that came from a tool or a file (a declared ``unblock``, a lesson read back from a store,
a mined rule's sentence, an upstream MCP server's tool description) is read by
:func:`screen_instruction`, the one screen for all of them, and used as its verdict says
(:class:`Use`):

* ``command``: a shell command line that has a command's structure (it parses; no word that
  starts a command is a label such as ``SYSTEM:`` or a capitalised word of prose such as
  ``Export``; no sentence ends inside it), passes the structural command screen
  (:func:`unstuck.commands.screen.screen_command`) and is a plain command line of simple commands
  (:func:`unstuck.commands.plain.plain_command_refusal`: no ``$(…)``, backticks or process
  substitution, no redirection to or from a file or device, no write to a shell start-up file,
  no variable set that runs or loads code or sends traffic elsewhere, ``LD_PRELOAD``,
  ``HTTPS_PROXY``, ``PIP_INDEX_URL`` …): it may be shown as "Run: …" and remembered;
* ``sentence``: one plain sentence (a capital letter, a space, one full stop at the end and no
  sentence end before it, one line, at most :data:`SENTENCE_MAX_CHARS` characters, no escape
  sequence) that holds no instruction aimed at the agent: it may be shown as it is and
  remembered;
* ``evidence``: anything else (two sentences, a line break, a label, a long text): it is only
  ever quoted as the tool's words (:func:`unstuck.core.text.quote_evidence`), never shown as
  "Run: …", never a lesson's unblock, never a prompt's instruction;
* ``refused``: it holds an instruction aimed at the agent or a command that runs what it
  downloads (:func:`find_instruction`), hidden characters, or a command the command screen
  refuses (a secret sent over the network, a write to a trust file, …) or that is not a plain
  command line: it is not repeated at all.

:func:`find_instruction` is the one place that asks the injection shapes: the adversarial rows
of the signal table (:func:`unstuck.recognise.classify.find_injection`: text that addresses the agent,
asks it to reveal, paste, send or export a secret, or to forget or ignore what it was told)
and the download-and-run structure (:func:`unstuck.commands.screen.find_download_and_run`), both read
in the text's :func:`unstuck.core.text.match_form` (NFKC, format characters removed), so
``Ｉｇｎｏｒｅ previous instructions`` reads as it shows. Every screen of prose goes through
it, so when those shapes grow, every path here uses them as they grow.
"""

from __future__ import annotations

import enum
import unicodedata
from dataclasses import dataclass

import re2

from unstuck.commands.parse import parse_command_line
from unstuck.commands.plain import plain_command_refusal
from unstuck.commands.screen import SCREEN_MAX_CHARS, find_download_and_run, screen_command
from unstuck.core.text import EVIDENCE_CHARS, clean_terminal_text, has_invisible, match_form, quote_evidence
from unstuck.recognise.classify import find_injection

__all__ = ["SENTENCE_MAX_CHARS", "Screening", "Use", "find_instruction", "looks_like_sentence",
           "screen_instruction"]

#: The longest text accepted as one plain sentence (the length of quoted evidence).
SENTENCE_MAX_CHARS = EVIDENCE_CHARS


class Use(enum.StrEnum):
    """What a screened text may become (see the module doc)."""

    COMMAND = "command"
    SENTENCE = "sentence"
    EVIDENCE = "evidence"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class Screening:
    """The screen's verdict on one text.

    Attributes:
        use: what the text may become.
        text: the text as given, outer whitespace stripped.
        reason: why it is not accepted (``None`` for a command or a sentence); one phrase,
            with any tool text in it quoted as evidence.
    """

    use: Use
    text: str
    reason: str | None = None

    @property
    def accepted(self) -> bool:
        """It may be shown or remembered as it is: a command or a plain sentence."""
        return self.use in (Use.COMMAND, Use.SENTENCE)


def find_instruction(text: str) -> str | None:
    """The part of ``text`` that reads as an instruction aimed at the agent, or ``None``: a
    line an adversarial row of the signal table matches (:func:`unstuck.recognise.classify.find_injection`:
    "ignore previous instructions", a request to paste a token into the chat, …) or a command
    that runs what it downloads (:func:`unstuck.commands.screen.find_download_and_run`, read by the
    shell's structure), each read in the text's :func:`unstuck.core.text.match_form` too
    (fullwidth letters, format characters). Never raises."""
    return find_injection(text) or find_download_and_run(text) or find_download_and_run(match_form(text))


def looks_like_sentence(text: str) -> bool:
    """Whether ``text`` is written as an action in words rather than a command: it starts with
    a capital letter, ends with a full stop and holds a space ("Let pid 42 finish, or stop
    it."), whether or not it is one plain sentence."""
    action = text.strip()
    return action[:1].isupper() and action.endswith(".") and " " in action


#: A sentence end followed by more text: a full stop, question or exclamation mark (or an
#: ellipsis) after a letter, a digit or a closing mark, then white space and a word.
_SENTENCE_END_INSIDE = re2.compile(r"[\p{L}\p{N}_)\]\"'’”][.!?…]+[\"'’”)\]]*\s+\S")
#: A word that starts a command in prose, not a program: a label or a clause (``SYSTEM:``,
#: ``Note,``), or a capitalised or upper-case word of letters only (``Export``, ``Please``,
#: ``IMPORTANT``). Program names are lower case, a path, a variable, or mixed case with a
#: hyphen or an inner capital (PowerShell's ``Set-ExecutionPolicy``, ``VBoxManage``).
_PROSE_WORD = re2.compile(r"^(?:.*[:,;]|[A-Z][a-z]+|[A-Z]{2,})$")


def _plain_sentence(text: str) -> str | None:
    """Why ``text`` (written as a sentence) is not one plain sentence, or ``None`` when it is."""
    if "\n" in text or "\t" in text:
        return "it spans lines"
    if len(text) > SENTENCE_MAX_CHARS:
        return f"it is longer than {SENTENCE_MAX_CHARS} characters"
    if _SENTENCE_END_INSIDE.search(text[:-1]) is not None:
        return "it is more than one sentence"
    return None


def _command_structure(text: str) -> str | None:
    """Why ``text`` does not have a command's structure, or ``None`` when it has."""
    if "\n" in text:
        return "it spans lines"
    if len(text) > SCREEN_MAX_CHARS:
        return f"it is longer than {SCREEN_MAX_CHARS} characters"
    line = parse_command_line(text)
    if not line.complete or not line.commands:
        return "it does not parse as a shell command"
    for command in line.commands:
        if command.depth == 0 and not command.in_substitution and command.words \
                and _PROSE_WORD.match(command.words[0]):
            return f"it reads as prose: {quote_evidence(command.words[0], 40)} is not a program"
    if _SENTENCE_END_INSIDE.search(text) is not None:
        return "it reads as prose: a sentence ends inside it"
    return None


def screen_instruction(text: str) -> Screening:
    """Screen a text from a tool or a file before it becomes an instruction (see the module
    doc): an injected instruction or a download-and-run anywhere in it (:func:`find_instruction`,
    read in the text's NFKC form with format characters removed) or hidden characters (what
    :func:`unstuck.core.text.has_invisible` finds, and any other format character, general category
    Cf) refuse it; a text written as a sentence (:func:`looks_like_sentence`, in its NFKC form:
    a fullwidth full stop ends a sentence too) is accepted when it is one plain sentence of at
    most :data:`SENTENCE_MAX_CHARS` characters, and is evidence otherwise; any other text is
    accepted as a command when it has a command's structure, passes
    :func:`unstuck.commands.screen.screen_command` and is a plain command line
    (:func:`unstuck.commands.plain.plain_command_refusal`), refused when either refuses it, and is
    evidence otherwise. Escape sequences or control characters make it evidence. Never raises."""
    stripped = text.strip()
    found = find_instruction(text)
    if found is not None:
        return Screening(Use.REFUSED, stripped, f"it holds an instruction: {quote_evidence(found)}")
    if has_invisible(text) or any(unicodedata.category(char) == "Cf" for char in text):
        return Screening(Use.REFUSED, stripped, "it holds invisible characters")
    if not stripped:
        return Screening(Use.EVIDENCE, stripped, "it is empty")
    if clean_terminal_text(stripped) != stripped:
        return Screening(Use.EVIDENCE, stripped, "it holds terminal control characters")
    if looks_like_sentence(match_form(stripped)):
        why = _plain_sentence(match_form(stripped))
        if why is not None:
            return Screening(Use.EVIDENCE, stripped, f"it is not one plain sentence: {why}")
        return Screening(Use.SENTENCE, stripped)
    why = _command_structure(stripped)
    if why is not None:
        return Screening(Use.EVIDENCE, stripped, f"it is neither a command nor one plain sentence: {why}")
    refused = screen_command(stripped).refused or plain_command_refusal(stripped)
    if refused is not None:
        return Screening(Use.REFUSED, stripped, f"it fails the command screen: {refused}")
    return Screening(Use.COMMAND, stripped)
