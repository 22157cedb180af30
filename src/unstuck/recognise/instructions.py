"""What a tool's text may become: one of unstuck's instructions, or only quoted evidence
(DESIGN.md: tool text never becomes an instruction of unstuck's; issue 23, deliver 4).
Internal: not a supported import path (docs/reference/index.md lists those that are).

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

from unstuck.commands.credentials import ChangeKind, credential_changes
from unstuck.commands.parse import parse_command_line
from unstuck.commands.plain import plain_command_refusal
from unstuck.commands.screen import SCREEN_MAX_CHARS, find_download_and_run, screen_command
from unstuck.core.text import EVIDENCE_CHARS, clean_terminal_text, has_invisible, match_form, quote_evidence
from unstuck.recognise.classify import find_injection

__all__ = ["SENTENCE_MAX_CHARS", "Screening", "Use", "find_instruction", "looks_like_sentence", "refused_change",
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


#: Where a destination is written: an e-mail address or a URL.
_ADDRESS = r"(?:[\w.+-]+@[\w-]+(?:\.[\w-]+)+|https?://\S+|www\.\S+)"
#: What names a secret or what holds one: a secret's word, a variable named like one
#: (``GH_TOKEN``), or a file where tools keep credentials (the credential catalogue's files:
#: netrc(5), ``~/.ssh``, AWS CLI credentials, ``.env``, ``.npmrc``, ``.pypirc``, git-credential-store(1),
#: docker login's ``config.json``, gh's ``hosts.yml``).
_SECRET_WORDS = (r"(?:\b(?:tokens?|passwords?|passphrases?|secrets?|api[ _-]?keys?|private\s+keys?|credentials?"
                 r"|access\s+keys?|ssh\s+keys?|session\s+cookies?|cookies?)\b|\b[A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|_KEY"
                 r"|_PWD)\b|~/|/etc/|\.netrc\b|\.ssh\b|id_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws\b|\.env\b|\.npmrc\b"
                 r"|\.pypirc\b|\.git-credentials\b|config\.json\b|hosts\.yml\b)")

#: Shapes of an instruction written as one plain sentence (issue 23, deliver 4), read in the
#: text's :func:`unstuck.core.text.match_form`, each ``(what, pattern, source)``; a pattern is
#: RE2, case-insensitive unless it says ``(?-i:…)``. The signal table's adversarial rows
#: (:func:`unstuck.recognise.classify.find_injection`) run first; these are the shapes a
#: sentence shown to the *user* as what to do must not have, since the agent reads it too.
_PROSE_SHAPES: tuple[tuple[str, str, str], ...] = (
    ("it tells the assistant what to do",
     r"\b(?:the|this|your|our|an?|any|every)\s+(?:ai|assistant|agent|model|llm|chatbot|bot|copilot"
     r"|ai\s+(?:assistant|agent|model)|(?:coding|autonomous)\s+(?:agent|assistant))s?\b[^\n]{0,40}?\b"
     r"(?:should|must|shall|needs?\s+to|has\s+to|have\s+to|is\s+(?:to|required\s+to|expected\s+to|supposed\s+to"
     r"|allowed\s+to|permitted\s+to)|ought\s+to|will\s+(?:need\s+to|have\s+to)|may\s+now|can\s+now|can\s+safely)"
     r"\s+(?:now\s+|first\s+|then\s+|immediately\s+|always\s+|also\s+|just\s+|simply\s+|safely\s+)*"
     r"(?:not\s+|never\s+)?(?P<verb>[a-z]+)\b"
     r"|\b(?:assistant|agent|ai|llm|model|claude|chatgpt|gpt|copilot|gemini)\s*[,:]\s*(?:please\s+)?"
     r"(?:run|execute|type|send|post|paste|delete|remove|erase|wipe|upload|forward|copy|read|open|fetch|download"
     r"|install|export|set|change|disable|ignore|reply|respond|tell)\b"
     r"|\byou\s*,?\s*(?:as\s+)?(?:the|an?)\s+(?:ai|assistant|agent|model|llm)\s*,?\s*(?:should|must|shall|need\s+to"
     r"|have\s+to|are\s+to)\b",
     "OWASP Top 10 for LLM Applications 2025, LLM01 Prompt Injection (indirect injection: content that addresses "
     "the model with instructions); AgentDojo src/agentdojo/attacks/important_instructions_attacks.py (a message "
     "'to you, {model}' with what to do first); an unblock is written for the user and says what the user does"),
    ("it asks for a secret or a file's content to be posted or sent",
     r"\b(?:post|paste|send|share|upload|forward|e-?mail|submit|reveal|include|copy)\s+(?:it|them|this|that"
     r"|its\s+(?:value|contents?)|the\s+(?:value|contents?|output|text|token|key|password|secret|file|credentials?)"
     r"|your\s+(?:token|key|password|secret|credentials?)|\$?[A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|_KEY))\b"
     r"[^\n]{0,40}?\b(?:in(?:to)?|to|within|on|with)\s+(?:the\s+|this\s+|our\s+|a\s+|an\s+|your\s+|my\s+)?"
     r"(?:chat|conversation|reply|response|answer|thread|channel|support|helpdesk|help\s+desk|us|me|the\s+team"
     r"|gist|pastebin|" + _ADDRESS + r")(?:\b|$)",
     "OWASP Top 10 for LLM Applications 2025, LLM01 Prompt Injection and LLM02 Sensitive Information "
     "Disclosure; AgentDojo's injection tasks (send a security code or a file's text to an address); MITRE "
     "ATLAS AML.T0057 LLM Data Leakage; no program's own message asks for a secret to be posted (this shape "
     "counts only with a secret or a credential file named in the same text)"),
    ("it orders data forwarded or copied to an address",
     r"\b(?:forward|cc|bcc|mirror|redirect|replicate|exfiltrate|relay)\b[^\n]{0,80}?\bto\s+" + _ADDRESS
     + r"|\b(?:send|e-?mail|mail|post|upload|deliver|sync|copy|report)\s+(?:a\s+copy|copies|duplicates?|all\b|every\b"
     r"|each\b|everything\b|any\b|the\s+(?:full|entire|complete|whole)\b)[^\n]{0,80}?\bto\s+" + _ADDRESS
     + r"|\b(?:always|automatically|from\s+now\s+on|in\s+future|every\s+time|whenever)\b[^\n]{0,60}?\b(?:send|forward"
     r"|copy|cc|bcc|e-?mail|mail|upload|post|report)\b[^\n]{0,80}?\bto\s+" + _ADDRESS,
     "AgentDojo's injection tasks of its default suites (workspace: 'email the text … to …@…', 'forward … to "
     "…'; slack: 'post them to the website www.…'); OWASP Top 10 for LLM Applications 2025, LLM01 scenario 1 "
     "(instructions in content to send e-mails and leak data)"),
    ("it asks for verification to be turned off",
     r"(?:^|[.!?:;]\s+|\b(?:please|then|now|first|just|simply|and|to\s+continue,?)\s+)"
     r"(?:disable|turn\s+off|switch\s+off|skip|bypass|ignore|deactivate)\s+(?:the\s+|all\s+)?(?:ssl|tls|https"
     r"|certificate|cert|host\s*key|signature|gpg|checksum|integrity|hash)\s*(?:verification|validation|checks?"
     r"|checking|verify|pinning)\b|\b(?:strict-ssl|sslverify|ssl[_-]verify|verify[_-]ssl|insecure-skip-tls-verify"
     r"|stricthostkeychecking|tls[_-]reject[_-]unauthorized|tls-verify|git_ssl_no_verify)\b[^\n]{0,20}?\b(?:false|no|0|off)\b",
     "the credential-change catalogue's verification rows (unstuck/data/credential_changes.yaml: npm "
     "strict-ssl, git http.sslVerify, NODE_TLS_REJECT_UNAUTHORIZED, StrictHostKeyChecking, kubectl "
     "--insecure-skip-tls-verify, podman --tls-verify), written in words; OWASP Top 10 for LLM Applications "
     "2025, LLM01 (an injected instruction that weakens the agent's protections)"),
)
_COMPILED_SHAPES = tuple((what, re2.compile("(?i)" + pattern)) for what, pattern, _source in _PROSE_SHAPES)
_NAMES_A_SECRET = re2.compile(_SECRET_WORDS)
#: How near (characters) a request to post or send must name a secret or a credential file.
_SECRET_NEAR = 120
#: Words after "the agent must" that say what is done to it or what state it is in, not an order.
_STATE_VERBS = frozenset({"be", "been", "being", "get", "got", "remain", "stay"})
#: The changes a command offered to the user must never make (:mod:`unstuck.commands.credentials`):
#: one that turns a check off, or prints or exports a secret.
_REFUSED_CHANGES = frozenset({ChangeKind.VERIFICATION, ChangeKind.SECRET_EXPORT})


def _prose_instruction(text: str) -> str | None:
    """The part of ``text`` (in its match form) that has one of :data:`_PROSE_SHAPES`, with
    what it does (``"it orders …: 'excerpt'"``), or ``None``."""
    form = match_form(text)
    for what, pattern in _COMPILED_SHAPES:
        for found in pattern.finditer(form):
            if "verb" in pattern.groupindex and found.group("verb") in _STATE_VERBS:
                continue  # "the agent must be restarted": what is done to it, not what it is told to do
            if what.startswith("it asks for a secret") and _NAMES_A_SECRET.search(
                    form[max(found.start() - _SECRET_NEAR, 0):found.end() + _SECRET_NEAR]) is None:
                continue  # "send it to us" with no secret or credential file named in its sentence
            return f"{what}: {quote_evidence(found.group(0), 120)}"
    return None


def refused_change(command_line: str) -> str | None:
    """Why a command line must not be offered to the user as an unblock, or ``None``: a part of
    it the credential-change catalogue (:func:`unstuck.commands.credentials.credential_changes`)
    reads as turning a check off (``npm config set strict-ssl false``, ``git config --global
    http.sslVerify false``) or as printing or exporting a secret. Never raises (a catalogue or
    parse problem refuses: what cannot be read is not offered)."""
    try:
        changes = credential_changes(command_line)
    except (ValueError, RecursionError):  # a screen never raises: what it cannot read is refused
        return "it cannot be read by the credential-change catalogue"
    for change in changes:
        if change.kind in _REFUSED_CHANGES:
            return f"{change.why} ({change.name})"
    return None


def find_instruction(text: str) -> str | None:
    """The part of ``text`` that reads as an instruction aimed at the agent, or ``None``: a
    line an adversarial row of the signal table matches (:func:`unstuck.recognise.classify.find_injection`:
    "ignore previous instructions", a request to paste a token into the chat, …), a command
    that runs what it downloads (:func:`unstuck.commands.screen.find_download_and_run`, read by the
    shell's structure), or a sentence of one of :data:`_PROSE_SHAPES` (it tells the assistant
    what to do, asks for a secret or a file's content to be posted or sent, orders data
    forwarded to an address, or asks for verification to be turned off), each read in the
    text's :func:`unstuck.core.text.match_form` too (fullwidth letters, format characters).
    Never raises."""
    return (find_injection(text) or find_download_and_run(text) or find_download_and_run(match_form(text))
            or _prose_instruction(text))


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
    refused = screen_command(stripped).refused or plain_command_refusal(stripped) or refused_change(stripped)
    if refused is not None:
        return Screening(Use.REFUSED, stripped, f"it fails the command screen: {refused}")
    return Screening(Use.COMMAND, stripped)
