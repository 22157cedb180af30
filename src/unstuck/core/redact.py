"""Secrets never stored or shown (issue 12, deliver 5; issue 23, deliver 3): what a secret is,
and the functions the two boundaries apply, so no table, field or command redacts on its own:
the store boundary (:func:`unstuck.store.engines.clean_params`: every string every journal and
lesson statement is given) and the output boundary (:mod:`unstuck.core.output`: every command's
streams, its JSON documents, files and HTML pages), both through :func:`redact_document`
(events pass it in :meth:`unstuck.guard.guard.Guard.emit`). The model still sees what the tool returned.
Internal: not a supported import path (docs/reference/index.md lists those that are).

These secrets are found:

* **tokens of known formats**, by the detectors of Yelp's ``detect-secrets`` library (its
  plugins' ``denylist`` patterns: GitHub, GitLab, AWS access keys, OpenAI, Slack, Stripe,
  SendGrid, npm, PyPI, Telegram, Discord, Mailchimp, Square, Azure storage keys, JSON Web
  Tokens), plus PEM private-key blocks (RFC 7468: ``-----BEGIN … PRIVATE KEY-----`` to its
  ``END`` line);
* **values given to names that say they are secret**: ``GH_TOKEN=…``, ``password: …``,
  ``"api_key": "…"``, ``--token …``, an ``Authorization`` header's credentials (RFC 9110
  section 11.6.2; Bearer, RFC 6750; Basic, RFC 7617) as a header line, a JSON or dict key
  (``{"Authorization": "Bearer …"}``, ``{'Authorization': …}``: the scheme stays) or an HTTP
  ``Cookie``/``Set-Cookie`` key (RFC 6265 sections 4.1 and 5.4), and the password of a URL's
  userinfo, whose user may be empty (RFC 3986 section 3.2.1: ``redis://:SECRET@host``;
  ``psql "postgresql://u:SECRET@h/db"`` too). A quoted value is masked whole, spaces and all
  (``password="correct horse battery"``); a quote may be escaped, as JSON writes a document
  inside a string (RFC 8259 section 7: ``{\\"password\\": \\"…\\"}``); an XML element named
  like a secret loses its text (``<password>…</password>``, as Maven's ``settings.xml`` keeps
  a server's password and key passphrase: maven.apache.org, "Settings Reference", Servers);
* **token formats detect-secrets has no plugin for** (its ``NpmDetector`` matches only an
  ``.npmrc`` ``_authToken=`` line, and version 1.5.0 has none for Hugging Face): npm access
  tokens, ``npm_`` and 36 letters or digits (docs.npmjs.com, "About access tokens"), Hugging
  Face user access tokens, ``hf_`` and 34 or more letters (huggingface.co/docs, "User access
  tokens"), and an ``.npmrc``'s ``_authToken=``/``_auth=`` value with its registry kept
  (docs.npmjs.com, "npmrc"); SendGrid keys (``SG.``, 22, ``.``, 43; SendGrid docs, "API Keys") come from
  detect-secrets' own ``SendGridDetector``; and the other documented shapes of
  :data:`_DOCUMENTED_FORMATS` (GitHub fine-grained, Slack app-level and configuration tokens,
  OpenAI and Anthropic keys, Google API keys, Stripe test keys, GitLab routable tokens, Square,
  Databricks, Docker Hub, DigitalOcean, age), each with its issuer's page; and an AWS secret
  access key written next to its access key id (40 base64 characters after the id, as the
  access key ``.csv`` file the IAM console downloads has them: AWS IAM User Guide, "Managing
  access keys for IAM users"; near the id, in either order and whatever separates them, from
  the table below; the key alone, without the id or a name, has no shape to find);
* **credential files and variables**: a ``.netrc`` line's password (netrc(5): the token after
  ``password`` on a line made of netrc's ``machine``/``default``/``login``/``password``/
  ``account``/``port`` tokens, such a line quoted inside a command, or ``machine NAME login
  NAME password VALUE`` within a line), a ``.pgpass`` line's password (PostgreSQL
  documentation, "The Password File": ``hostname:port:database:username:password``, ``:`` and
  ``\\`` escaped with ``\\``; a whole line, its password the rest of it, or such an entry as one
  word of a line, ``echo 'h:5432:db:u:pw' >> ~/.pgpass``), a
  Docker ``config.json``'s ``"auth"`` (base64 of user:password)
  and ``"identitytoken"``/``"registrytoken"`` (docs.docker.com, "docker login": credential
  stores and the ``auths`` key), and variables whose documented name ends in ``_PWD``
  (``MYSQL_PWD``, MySQL reference manual, "Environment Variables") or is ``SSHPASS``
  (sshpass(1), ``-e``);
* **passwords given on a command line**: ``mysql``/``mariadb`` (and their ``dump``, ``admin``,
  ``import``, ``show``, ``check``, ``slap`` tools) ``-pSECRET`` (mysql(1): the short form takes
  no space; ``-p`` alone prompts and ``-p NAME`` names a database, so neither is masked; ``-P``
  is the port) and ``--password=SECRET``; ``sshpass -p SECRET`` / ``-pSECRET`` among sshpass's
  own options, before the command it runs (sshpass(1); ``-f FILE`` and ``-e`` carry no
  password); ``curl -u user:SECRET`` / ``--user`` / ``-U`` / ``--proxy-user`` (curl(1):
  ``user:password``; a user without ``:`` makes curl prompt, nothing to mask); ``docker login
  -p SECRET`` / ``--password SECRET`` (docs.docker.com, "docker login": ``--password, -p``;
  ``--password-stdin`` carries none; ``-p`` of any other docker command, ``docker run -p
  8080:80``, is not a password) and ``podman login`` alike (podman-login(1)). Only the
  password is masked: the user, the options and the command stay;
* **the sourced table** ``unstuck/data/secret_arguments.yaml`` (:data:`TABLE_FILE`, every row
  with its manual or vendor page): programs' documented secret-bearing options and operands
  (``docker``/``podman login -p``, ``gh secret set --body``, ``az login -p``, ``redis-cli -a``
  and Redis's ``AUTH``, ``aws configure set aws_secret_access_key``, ``vercel env add``,
  OpenSSL's ``pass:``, smbclient's ``USER%PASSWORD``, ``kubectl create secret
  --from-literal`` …), vendor token formats by their documented prefix (Google's ``ya29.``,
  Twilio's ``SK…``, Vault's ``hvs.`` …), and identifiers written with their secret on one line
  whatever separates them (an AWS access key id and its secret access key, in either order; a
  Twilio API key SID and its secret).

Every string is also read as JSON writes it: a JSON string literal holding escapes
(``\\u0067hp_…``, ``\\/``, ``\\"``; RFC 8259 section 7) is decoded and its text redacted, so
an escape never hides a token; a JSON document's keys are redacted as its values are (a
token or a URL with a password used as a key), two keys that mask alike kept apart (``***``,
``***#2``).

A value given to a name that ends in ``file``, ``path`` or ``dir`` (``--password-file=/run/pw``,
``POSTGRES_PASSWORD_FILE=/run/secrets/db``) that looks like a path (holds ``/`` or ``\\``, or
starts with ``~`` or ``.``) is a path to a secret, not the secret: it stays, since the path is
what a reader needs to follow a "no such file" error.

Each secret is replaced by :data:`MASK` (the name and the structure around it stay, so a
reader can still tell what happened). :func:`redact` is linear in its input and never raises:
every pattern is an RE2 pattern (google-re2: matching time linear in the text, whatever the
pattern; no backtracking), detect-secrets' own patterns included (:func:`_format_matchers`
says how they are carried over), and a text is redacted whole, line by line, never cut into
pieces a secret could straddle.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import importlib.util
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import re2
import yaml

from unstuck.core.cache import bundled_document, load_or_derive
from unstuck.core.jsonshape import deeper_than

__all__ = [
    "MASK", "redact", "redact_document", "redact_value", "redacted_json", "redacted_json_each", "redacted_prefix",
]

#: What a secret is replaced with.
MASK = "***"


def _quiet_options() -> Any:
    """re2 options that do not log a refused pattern to standard error."""
    options = re2.Options()
    options.log_errors = False
    return options


_QUIET = _quiet_options()


class _Match:
    """One match of a :class:`_Pattern`: its groups by name or number, its text and span.
    (re2's own match object rebuilds its pattern's table of group names for every look-up by
    name; this one reads the table the pattern made once.)"""

    __slots__ = ("_match", "_names")

    def __init__(self, match: Any, names: Mapping[str, int]) -> None:
        self._match, self._names = match, names

    def group(self, key: int | str = 0) -> Any:
        return self._match.group(self._names[key] if isinstance(key, str) else key)

    def get(self, name: str) -> Any:
        """The group ``name``, ``None`` when it did not take part or the pattern has none of that name."""
        index = self._names.get(name)
        return None if index is None else self._match.group(index)

    @property
    def string(self) -> str:
        return str(self._match.string)

    def start(self) -> int:
        return int(self._match.start())

    def end(self) -> int:
        return int(self._match.end())


class _Pattern:
    """An RE2 pattern (google-re2: linear in the text it reads, whatever the pattern; flags
    written inline, ``(?i)``) that never matches across a line break (:func:`_one_line`), so
    it can be run once over many lines joined."""

    __slots__ = ("_names", "_regexp")

    def __init__(self, pattern: str) -> None:
        self._regexp = re2.compile(_one_line(pattern), _QUIET)
        self._names: dict[str, int] = dict(self._regexp.groupindex)

    def sub(self, repl: str | Callable[[_Match], str], text: str, count: int = 0) -> str:
        if isinstance(repl, str):
            return str(self._regexp.sub(lambda _m: repl, text, count))
        names = self._names
        return str(self._regexp.sub(lambda m: repl(_Match(m, names)), text, count))

    def search(self, text: str) -> _Match | None:
        found = self._regexp.search(text)
        return None if found is None else _Match(found, self._names)

    def match(self, text: str) -> _Match | None:
        found = self._regexp.match(text)
        return None if found is None else _Match(found, self._names)

    def fullmatch(self, text: str) -> _Match | None:
        found = self._regexp.fullmatch(text)
        return None if found is None else _Match(found, self._names)

    def finditer(self, text: str) -> Iterator[_Match]:
        names = self._names
        return (_Match(found, names) for found in self._regexp.finditer(text))


def _re2(pattern: str) -> _Pattern:
    """:class:`_Pattern` of ``pattern``."""
    return _Pattern(pattern)


def _one_line(pattern: str) -> str:
    """``pattern`` (RE2 or Python ``re`` syntax) rewritten so no match holds a line break: a
    ``\\s`` outside a class is ``[\\t\\f\\r ]``, inside one it is those four characters, and
    a negated class also excludes ``\\n`` (``.`` already does, without ``(?s)``)."""
    out: list[str] = []
    index, inside, negated = 0, False, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            escape = pattern[index:index + 2]
            if escape == "\\s" and not negated:
                out.append("\\t\\f\\r " if inside else "[\\t\\f\\r ]")
            else:
                out.append(escape)
            index += 2
            continue
        if not inside and char == "[":
            inside, negated = True, pattern.startswith("[^", index)
            start = index + (2 if negated else 1)
            if pattern.startswith("]", start):  # a ] first in a class is one of its characters
                start += 1
            out.append(pattern[index:start])
            index = start
            continue
        if inside and pattern.startswith("[:", index):  # a POSIX class, [[:alpha:]]
            end = pattern.find(":]", index + 2)
            if end != -1:
                out.append(pattern[index:end + 2])
                index = end + 2
                continue
        if inside and char == "]":
            if negated:  # before a last "-", which stays a character, not a range to the line break
                out.insert(len(out) - 1 if out[-1] == "-" else len(out), "\\n")
            out.append("]")
            inside = negated = False
            index += 1
            continue
        out.append(char)
        index += 1
    return "".join(out)


#: The detect-secrets plugins whose patterns are formats of a token (not entropy guesses, not
#: keyword heuristics, not IP addresses): their matches are always secrets.
_FORMAT_PLUGINS = (
    "AWSKeyDetector", "AzureStorageKeyDetector", "DiscordBotTokenDetector", "GitHubTokenDetector",
    "GitLabTokenDetector", "JwtTokenDetector", "MailchimpDetector", "NpmDetector", "OpenAIDetector",
    "PypiTokenDetector", "SendGridDetector", "SlackDetector", "SquareOAuthDetector", "StripeDetector",
    "TelegramBotTokenDetector",
)

#: A quote, bare or escaped once or three times (RFC 8259 section 7: a JSON document written
#: inside a JSON string, or inside a string inside that): ``"``, ``\\"``, ``\\\\\\"``, or ``'``.
_Q = r"""(?:(?:\\\\\\|\\)?["'])"""
#: Quotes one after another (a shell's ``'"'"'``, a quote inside another language's string).
_QS = _Q + "{0,5}"
#: A name that says its value is secret (environment variables, config keys, JSON fields, options).
#: Names ending in ``_PWD`` (``MYSQL_PWD``: MySQL reference manual, "Environment Variables")
#: and ``SSHPASS`` (sshpass(1), ``-e``) are documented secret variables too.
#: The secret word ends the name (``GITHUB_TOKEN``, ``db_password``, ``token2``; or names the
#: file that holds it, ``--password-file``: a path is then kept, see :data:`_PATH_NAME`), so a name that
#: only starts with one (``token_scopes``, ``password_policy``, ``secret_name``) says nothing of
#: its value (every pattern that uses it ends the name at a separator or a word boundary).
_SECRET_NAME = (r"[A-Za-z0-9_.-]*(?:token|secret|passw(?:or)?d|passphrase|api[_-]?key|access[_-]?key"
                r"|private[_-]?key|client[_-]?secret|credentials?|auth[_-]?key|_pwd|(?-i:SSHPASS))[0-9]*"
                r"(?:[-_.](?:file|path|dir))?")
#: An unquoted value's characters, backslashes as in :data:`_WORD`.
_VALUE_CHAR = r"""(?:[^\s"',;}&\\]|\\{1,2}[^\s"'\\/bfnrtu])"""
#: Its first character: not a quote, and not ``$`` (``PASSWORD=$PW`` names a variable, not its value).
_VALUE_FIRST = r"""(?:[^\s"',;}&$\\]|\\{1,2}[^\s"'\\/bfnrtu])"""
#: A word of a command line or a file: a backslash (or two) only before a character that is
#: neither a quote nor one JSON escapes (RFC 8259 section 7: ``\\"``, ``\\n``, ``\\u…``), so a
#: masked word never takes the backslash of an escaped quote or an escaped line break.
_WORD = r"""(?:[^\s"'\\]|\\{1,2}[^\s"'\\/bfnrtu])"""
#: ``NAME=value``, ``NAME: value``, ``"NAME": "value"`` (one word, or a quoted word).
_ASSIGNED = _re2(r"(?i)(?P<name>" + _Q + r"?\b" + _SECRET_NAME + r"\b" + _QS + r")(?P<sep>\s*[=:]\s*)"
                 r"(?P<quote>" + _QS + r")(?P<value>" + _VALUE_FIRST + _VALUE_CHAR + r"{3,})")
#: ``NAME "value"``: a name, spaces, a quoted word (``password 'hunter2'``).
_SPACED = _re2(r"(?i)(?P<name>" + _Q + r"?\b" + _SECRET_NAME + r"\b" + _QS + r")(?P<sep>\s+)"
               r"(?P<quote>" + _Q + r"{1,5})(?P<value>" + _VALUE_FIRST + _VALUE_CHAR + r"{3,})")


def _quoted_value(opening: str) -> str:
    """A quoted value up to its closing quote, spaces and all: one alternative per quote
    (``"``, ``'``, and each escaped as :data:`_Q` allows), since RE2 has no backreference.
    Bare quotes hold escapes (``\\"`` inside ``"…"``: JSON, Python reprs); escaped ones end
    at the first escaped quote of their kind."""
    parts = []
    for index, (quote, body) in enumerate((
            ('"', r'(?:[^"\\\n]|\\[^\n])*'), ("'", r"(?:[^'\\\n]|\\[^\n])*"),
            (r'\\"', r'(?:[^"\\\n]|\\[^"\\\n])*'), (r"\\'", r"(?:[^'\\\n]|\\[^'\\\n])*"),
            (r'\\\\\\"', r'(?:[^"\\\n]|\\[^"\\\n])*'), (r"\\\\\\'", r"(?:[^'\\\n]|\\[^'\\\n])*"))):
        parts.append(f"(?P<q{index}>{quote})(?P<v{index}>{body}){quote}")
    return opening + "(?:" + "|".join(parts) + ")"


#: A quoted value masked whole, spaces and all, where its name is surely a key: assigned
#: (``NAME="value with spaces"``, ``NAME = 'value'``), a quoted key (``"NAME": "value"``,
#: ``'NAME': '…'``, ``\\"NAME\\": \\"…\\"``) or a key that starts its line (YAML, INI: ``NAME: "…"``).
#: An unquoted name and a colon inside a sentence (``--with-token: "Read token from standard
#: input"``) is a tool's prose: only a one-word value there is masked (:data:`_ASSIGNED`).
_ASSIGNED_QUOTED = (
    _re2(_quoted_value(r"(?i)(?P<name>\b" + _SECRET_NAME + r"\b)(?P<sep>\s*=\s*)")),
    _re2(_quoted_value(r"(?i)(?P<name>" + _Q + r"\b" + _SECRET_NAME + r"\b" + _Q + _QS + r")(?P<sep>\s*[=:]\s*)")),
    _re2(_quoted_value(r"(?i)(?P<name>(?m:^)\s*\b" + _SECRET_NAME + r"\b)(?P<sep>\s*:\s*)")),
)
#: ``--name value`` / ``--name=value``, and ``--name "value with spaces"``.
_OPTION = _re2(r"(?i)(?P<name>--" + _SECRET_NAME + r")(?P<sep>=|\s+)(?P<value>[^\s\"',;$\-\\][^\s\"',;\\]{3,})")
_OPTION_QUOTED = _re2(_quoted_value(r"(?i)(?P<name>--" + _SECRET_NAME + r")(?P<sep>=|\s+)"))
#: ``Authorization: Bearer X`` / ``Basic X`` / ``token X`` (RFC 9110 11.6.2), also as a JSON
#: or dict key (``"Authorization": "Bearer X"``, ``'Authorization': 'Bearer X'``).
_AUTHORIZATION = _re2(r"(?i)(?P<name>(?:proxy-)?authorization" + _QS + r"\s*[:=]\s*" + _QS
                      + r"(?:(?:bearer|basic|token|digest)\s+)?)(?P<value>[^\s\"',;\\]{4,})")
#: Headers whose whole value is a credential: GitLab's ``PRIVATE-TOKEN`` (docs.gitlab.com, REST
#: API authentication), ``X-API-Key``/``api-key``, ``X-Auth-Token``, ``Cookie`` (RFC 6265 5.4).
_CREDENTIAL_HEADER = _re2(r"(?i)(?P<name>(?:private-token|x-api-key|api-key|x-auth-token|cookie)" + _QS
                          + r"\s*:\s*" + _QS + r")(?P<value>[^\s\"',}\\]+)")
#: Credentials of the shapes their issuers document that detect-secrets' formats miss (or match
#: only in part), each with its source:
#:
#: * GitHub fine-grained tokens (``github_pat_``) and OAuth/app tokens of any length
#:   (docs.github.com, "About authentication to GitHub"; github.blog changelog 2021-03-31,
#:   "Authentication token format updates": tokens may grow up to 255 characters);
#: * Slack app-level tokens (``xapp-``) and configuration tokens (``xoxe.xoxp-``, refresh
#:   ``xoxe-``; api.slack.com, "Token types" and "Configuration tokens");
#: * OpenAI and Anthropic keys without the legacy marker (``sk-``, ``sk-proj-``, ``sk-ant-``;
#:   platform.openai.com, "Authentication"; docs.anthropic.com, "Get an API key");
#: * Google API keys (``AIza``; cloud.google.com, "Manage API keys");
#: * npm access tokens, ``npm_`` and 36 letters or digits (docs.npmjs.com, "About access
#:   tokens"); Hugging Face tokens, ``hf_`` and 34 or more letters (huggingface.co/docs, "User
#:   access tokens");
#: * Stripe test-mode secret and restricted keys, ``sk_test_``/``rk_test_`` (docs.stripe.com,
#:   "API keys": test keys are secret too; detect-secrets knows only the live ones);
#: * GitLab tokens of every documented prefix with the routable form's tail, ``.`` two digits
#:   ``.`` nine base-36 characters (docs.gitlab.com, "GitLab token overview", token prefixes;
#:   handbook.gitlab.com, "Routable tokens"): detect-secrets stops at the first dot;
#: * Square access tokens, ``EAAA`` and 60 characters (developer.squareup.com, "Access tokens");
#: * Databricks personal access tokens, ``dapi`` and 32 hex digits (docs.databricks.com,
#:   "Databricks personal access tokens");
#: * Docker Hub personal access tokens, ``dckr_pat_`` (docs.docker.com, "Access tokens");
#: * DigitalOcean tokens, ``dop_v1_``/``doo_v1_``/``dor_v1_`` and 64 hex digits
#:   (docs.digitalocean.com, "How to create a personal access token");
#: * age secret keys, ``AGE-SECRET-KEY-1`` and 58 Bech32 characters (age-encryption.org/v1).
#:
#: A shape of a fixed length runs on over the characters of its alphabet that follow it (a
#: longer run is masked whole, never cut after the documented length).
_DOCUMENTED_FORMATS = _re2(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xapp-[A-Za-z0-9-]{10,}|"
    r"xoxe(?:\.xox[a-z])?-[A-Za-z0-9-]{10,}|"
    r"sk-(?:ant-)?[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{30,}|npm_[A-Za-z0-9]{36,}|hf_[A-Za-z]{34,}|"
    r"[sr]k_test_[0-9A-Za-z]{24,}|"
    r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-[A-Za-z0-9_-]{20,}(?:\.[0-9]{2}\.[0-9a-z]{9,})?|"
    r"EAAA[A-Za-z0-9_-]{60,}|dapi[0-9a-f]{32,}(?:-[0-9]+)?|dckr_pat_[A-Za-z0-9_-]{20,}|"
    r"do[por]_v1_[0-9a-f]{64,}|AGE-SECRET-KEY-1[0-9A-Z]{58,})")
#: An ``.npmrc``'s ``_authToken=`` / ``_auth=`` (docs.npmjs.com, "npmrc": auth-related
#: configuration), masked before detect-secrets' ``NpmDetector`` (whose match is the whole
#: line) so the registry stays.
_NPMRC_AUTH = _re2(r"(?P<name>(?:(?m:^)|[\s:/])_auth(?:Token)?\s*=\s*)(?P<value>" + _WORD + "+)")
#: A Docker ``config.json``'s ``"auth"`` value (base64 of ``user:password``; docs.docker.com,
#: "docker login"), quoted key and quoted value: plain ``auth: failed`` is left alone.
_DOCKER_AUTH = _re2(r'(?i)(?P<name>(?:\\\\\\|\\)?"auth(?:\\\\\\|\\)?"\s*:\s*(?:\\\\\\|\\)?")(?P<value>[^"\s\\]+)'
                    r'(?P<end>(?:\\\\\\|\\)?")')
#: A line made only of netrc(5) tokens (``machine NAME``, ``default``, ``login NAME``,
#: ``password STRING``, ``account STRING``, ``port N``): its ``password`` token's value.
_NETRC_LINE = _re2(r"\s*(?:(?:machine|login|password|account|port)\s+\S+|default)"
                   r"(?:\s+(?:(?:machine|login|password|account|port)\s+\S+|default))*\s*")
_NETRC_PASSWORD = _re2(r"(?P<name>(?:^|\s)password\s+)(?P<value>(?:[^\s\\]|\\{1,2}[^\s\"'\\/bfnrtu])+)")
#: netrc(5)'s ``machine NAME login NAME password VALUE`` (or ``default login …``) inside a line
#: of prose or a command: the full sequence, ``login`` included, so ordinary words are left.
_NETRC_INLINE = _re2(r"(?P<name>\b(?:machine\s+\S+|default)\s+login\s+\S+\s+password\s+)(?P<value>" + _WORD + "+)")
#: A netrc line quoted inside a longer line (``printf 'machine h login u password p' >> ~/.netrc``):
#: from the quote, netrc(5) tokens up to ``password`` and its value, which ends at the quote.
_NETRC_QUOTED = _re2(r"(?P<name>['\"]\s*(?:machine\s+[^\s'\"]+|default)"
                     r"(?:\s+(?:machine|login|account|port)\s+[^\s'\"]+)*\s+password\s+)"
                     r"(?P<value>" + _WORD + "+)")
#: A ``.pgpass`` line (PostgreSQL documentation, "The Password File"):
#: ``hostname:port:database:username:password``, each of the first four a value or ``*``, the
#: port a number; ``:`` and ``\\`` escaped with ``\\``. The first four fields hold no space (as
#: the host, port and names that libpq matches them against), so a log line of times and words
#: is not one; the password is the rest of the line.
_PGPASS_FIELD = r"(?:[^\s:\\'\"]|\\[:\\])+"
#: A host or database field: ``*``, or a value that is not only digits (``12:34:56:…``, a time
#: of day, is not a host, a port and a database).
_PGPASS_NAMED = r"(?:\*|(?:[0-9]|\\[:\\])*(?:[^\s:\\'\"0-9*]|\*)" + _PGPASS_FIELD + r"?)"
_PGPASS_HEAD = _PGPASS_NAMED + r":(?:[0-9]{1,5}|\*):" + _PGPASS_NAMED + ":" + _PGPASS_FIELD + ":"
_PGPASS_LINE = _re2(r"(?P<name>\s*" + _PGPASS_HEAD + r")(?P<value>(?:[^:\\\n]|\\[^\n])+)")
#: Such an entry as one word of a line (``echo 'h:5432:db:u:pw' >> ~/.pgpass``): exactly five
#: fields (:func:`_mask_pgpass_word` refuses a match with a colon just before or after it).
_PGPASS_WORD = _re2(r"(?P<name>" + _PGPASS_HEAD + r")(?P<value>(?:[^\s:\\'\"]|\\:|\\{1,2}[^\s\"'\\/bfnrtu:])+)")
#: An XML element named like a secret, its text up to the closing tag (Maven's ``settings.xml``
#: ``<server><password>…</password><passphrase>…</passphrase>``: maven.apache.org, "Settings
#: Reference"); a namespace prefix may come first (``<ns:password>``).
_XML_ELEMENT = _re2(r"(?i)<(?P<tag>(?:[A-Za-z0-9_.-]+:)?" + _SECRET_NAME + r")(?P<attrs>\s[^<>]*)?>"
                    r"(?P<value>(?:[^<\"\\]|\\.)+)</(?P<close>[A-Za-z0-9_.:-]+)\s*>")
#: A command that takes a password on its command line, and its arguments up to the end of the
#: shell command (``|``, ``;``, ``&``, a newline).
_COMMAND = _re2(r"(?P<pre>(?m:^)|[\s;&|(`'\"/=])(?P<cmd>curl|sshpass|mysql|mariadb|mysql(?:dump|admin|import|show"
                r"|check|slap)|mariadb-(?:dump|admin|import|show|check|slap))(?P<args>\s[^|;&\n]*)")


def _argument(first: str = r"""(?:[^\s"'\\]|\\{1,2}[^\s"'\\/bfnrtu])""") -> str:
    """A command's argument: quoted, up to the same closing quote (``'…'``, ``"…"``, or, inside
    a JSON string, ``\\"…\\"``, ``\\\\\\"…\\\\\\"``), or a bare word whose first character is
    ``first`` (:func:`_mask_argument` tells which). A quote with no closing one is not an
    opening quote (it ends a string the command line is in) and opens nothing."""
    quoted = ((r"'", r"[^'\n]+"), (r'"', r'(?:[^"\\\n]|\\.)+'), (r'\\"', r'(?:[^"\\\n]|\\[^"\\\n])+'),
              (r'\\\\\\"', r'(?:[^"\\\n]|\\[^"\\\n])+'), (r"\\'", r"(?:[^'\\\n]|\\[^'\\\n])+"))
    parts = [f"(?P<q{i}>{quote})(?P<v{i}>{body}){quote}" for i, (quote, body) in enumerate(quoted)]
    parts.append(f"(?P<v{len(quoted)}>{first}{_WORD}*)")
    return "(?:" + "|".join(parts) + ")"


def _mask_argument(match: _Match) -> str:
    """A command's option and its argument (:func:`_argument`): the argument masked, its quotes kept."""
    index = next(i for i in range(6) if match.get(f"v{i}") is not None)
    if match.group(f"v{index}") == MASK:
        return str(match.group(0))
    quote = match.get(f"q{index}") or ""
    return f"{match.group('name')}{quote}{MASK}{quote}"


#: mysql(1): ``-pSECRET`` (no space) and ``--password=SECRET``.
_MYSQL_PASSWORD = _re2(r"(?P<name>\s(?:-p|--password=))" + _argument())
#: sshpass(1): ``-p PASSWORD`` / ``-pPASSWORD`` among sshpass's options (``-f FILE``, ``-d FD``,
#: ``-P PROMPT``, ``-e[VAR]``, ``-v``, ``-h``, ``-V``), which end at the command it runs.
_SSHPASS_PASSWORD = _re2(r"\A(?P<name>(?:\s+-(?:[fdP]\s*[^\s-]\S*|e\S*|[vhV]+))*\s+-p\s*)" + _argument())
#: curl(1): ``-u user:password`` / ``--user`` / ``-U`` / ``--proxy-user`` (``-uuser:password`` too).
_CURL_USER = _re2(r"(?P<name>\s(?:-u|-U|--user|--proxy-user)(?:\s+|=)?" + _Q + r"?[^\s:'\"\\]*:)"
                  r"(?P<value>" + _WORD + "+)")
#: A name for a path to a secret (``--password-file``), and a value that looks like a path.
_PATH_NAME = _re2(r"(?i)[-_.](?:file|path|dir)(?:(?:\\\\\\|\\)?[\"'])?$")
_PATH_VALUE = _re2(r"\A[~.]|[/\\]")
#: ``scheme://user:password@host`` (RFC 3986 3.2.1; the user may be empty: ``redis://:pw@host``),
#: its slashes also as JSON may escape them (``https:\\/\\/u:pw@h``, RFC 8259 section 7).
_URL_PASSWORD = _re2(r"(?i)(?P<name>[a-z][a-z0-9+.-]*:(?:\\{0,3}/){2}[^\s:/?#@\\]*:)(?P<value>[^\s/?#@\\]+)@")
#: A PEM private key block (RFC 7468), whole (to the end of the text when it has no ``END`` line).
_PRIVATE_KEY = _re2(
    r"(?s)-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z ]*PRIVATE KEY(?: BLOCK)?-----|\z)")
#: A JSON string literal (RFC 8259 section 7) that holds an escape.
_JSON_LITERAL = _re2(r'"(?:[^"\\\n]|\\.)*\\.(?:[^"\\\n]|\\.)*"')
#: Words that every secret this module finds has near it: a line without one is left as it is
#: (most tool output), so redaction costs one scan of the text.
_HINT_SOURCE = (r"token|secret|passw|passphrase|key|auth|cred|:(?:\\{0,3}/){2}[^\s/@]*:[^\s/@]*@|"
                r"ghp_|gho_|ghu_|ghs_|ghr_|glpat|gl[a-z]+-|akia|asia|abia|acca|a3t|eyj|xox|hooks\.slack|sk-|sk_live|rk_live|sg\.|npm_|pypi-|sq0csp|"
                r"-us\d|\d{8,10}:|[mno][a-z\d_-]{23,25}\.|github_pat_|xapp-|aiza|cookie|hf_|_pwd|sshpass|mysql|mariadb|curl|"
                r"sk_test_|rk_test_|eaaa|dapi|dckr_pat_|_v1_|docker|podman|[^\s:#'\"]:(?:[0-9]{1,5}|\*):[^\s:]+:[^\s:]+:")


#: The bundled table of secrets on command lines, vendor token formats and identifier/secret
#: pairs (``unstuck/data/secret_arguments.yaml``; every row names its source).
TABLE_FILE = "secret_arguments.yaml"
_ROW_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
#: An argument of a command line: bare (:data:`_WORD`), quoted, or both run together (``--body='a b'``).
_TOKEN = _re2(r"""\s+(?P<tok>(?:'[^'\n]*'|"(?:[^"\\\n]|\\.)*"|""" + _WORD + r")+)")
#: How far apart (characters, on one line) an identifier and its secret may be written.
_PAIR_GAP = 80


@dataclass(frozen=True, slots=True)
class _CommandRow:
    """One ``commands`` row of :data:`TABLE_FILE` (its header says what each field means)."""

    name: str
    subcommand: tuple[frozenset[str], ...]
    options: tuple[str, ...]
    value_after: str | None
    operand: bool
    after: _Pattern | None
    skip: int
    every: bool
    unless: _Pattern | None
    max_words: int | None


class _Pair:
    """One ``pairs`` row: an identifier and, within :data:`_PAIR_GAP` characters before or after
    it on its line, whatever separates them, its secret (masked when it is random enough to be
    one: two of upper case, lower case and digits)."""

    __slots__ = ("_backward", "_forward", "_mask_id")

    def __init__(self, identifier: str, secret: str, mask_id: bool) -> None:
        edge = r"[^A-Za-z0-9/+=_\n-]"
        gap = r"[^A-Za-z0-9\n](?:[^\n]{0," + str(_PAIR_GAP) + r"}?" + edge + ")?"
        self._forward = _re2(r"\b(?P<id>" + identifier + r")(?P<gap>" + gap + r")(?P<value>" + secret
                             + r")(?P<end>" + edge + r"|(?m:$))")
        self._backward = _re2(r"(?P<pre>(?m:^)|" + edge + r")(?P<value>" + secret + r")(?P<gap>"
                              + r"[^A-Za-z0-9/+=_\n-](?:[^\n]{0," + str(_PAIR_GAP) + r"}?[^A-Za-z0-9\n])?"
                              + r")(?P<id>" + identifier + r")\b")
        self._mask_id = mask_id

    def sub(self, block: str) -> str:
        block = self._forward.sub(lambda m: self._masked(m, m.group("id"), m.group("gap") + "{}" + m.group("end"),
                                                         first=True), block)
        return self._backward.sub(lambda m: self._masked(m, m.group("id"), m.group("pre") + "{}" + m.group("gap"),
                                                         first=False), block)

    def _masked(self, match: _Match, identifier: str, frame: str, *, first: bool) -> str:
        value = match.group("value")
        classes = sum(1 for test in (str.isupper, str.islower, str.isdigit) if any(test(c) for c in value))
        if classes < 2:
            return str(match.group(0))
        shown = MASK if self._mask_id else identifier
        body = frame.format(MASK)
        return f"{shown}{body}" if first else f"{body}{shown}"


@dataclass(frozen=True, slots=True)
class _Table:
    """:data:`TABLE_FILE` compiled: the command pattern (a program of a row where a command
    starts), each program's rows, the
    formats as one pattern, the pairs, and the hint source that finds lines any of them may match."""

    commands: _Pattern
    rows: Mapping[str, tuple[_CommandRow, ...]]
    formats: _Pattern
    pairs: tuple[_Pair, ...]
    hint: str


def _table_error(where: str, problem: str) -> ValueError:
    return ValueError(f"unstuck/data/{TABLE_FILE}: {where}: {problem}")


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not (isinstance(value, list) and value and all(isinstance(v, str) and v for v in value)):
        raise _table_error(where, "needs a non-empty list of strings")
    return tuple(value)


def _rows_pattern(pattern: object, where: str) -> _Pattern:
    if not isinstance(pattern, str) or not pattern:
        raise _table_error(where, "needs an RE2 pattern")
    try:
        return _re2(pattern)
    except re2.error as exc:
        raise _table_error(where, f"is not an RE2 pattern: {exc}") from None


def _command_row(raw: Mapping[str, Any], where: str) -> tuple[tuple[str, ...], _CommandRow]:
    known = {"name", "program", "subcommand", "options", "value_after", "operand", "max_words", "source"}
    if set(raw) - known:
        raise _table_error(where, f"unknown fields {sorted(set(raw) - known)}")
    programs = _strings(raw.get("program"), f"{where} program")
    subcommand = tuple(frozenset(word.split("|")) for word in _strings(raw["subcommand"], f"{where} subcommand")) \
        if "subcommand" in raw else ()
    options = _strings(raw["options"], f"{where} options") if "options" in raw else ()
    operand = raw.get("operand")
    if (not options) == (operand is None):
        raise _table_error(where, "needs either options or an operand")
    after = unless = None
    skip, every = 0, False
    if operand is not None:
        if not isinstance(operand, dict) or set(operand) - {"after", "skip", "count", "unless"}:
            raise _table_error(f"{where} operand", "needs a mapping of after, skip, count, unless")
        after = _rows_pattern(operand["after"], f"{where} operand.after") if "after" in operand else None
        unless = _rows_pattern(operand["unless"], f"{where} operand.unless") if "unless" in operand else None
        skip = operand.get("skip", 0)
        count = operand.get("count", 1)
        if isinstance(skip, bool) or not isinstance(skip, int) or skip < 0 or count not in (1, "all"):
            raise _table_error(f"{where} operand", "skip is a count of words, count is 1 or all")
        every = count == "all"
    value_after = raw.get("value_after")
    max_words = raw.get("max_words")
    if value_after is not None and not (isinstance(value_after, str) and value_after):
        raise _table_error(where, "value_after needs a text")
    if max_words is not None and (isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1):
        raise _table_error(where, "max_words needs a positive number")
    return programs, _CommandRow(str(raw["name"]), subcommand, options, value_after, operand is not None,
                                 after, skip, every, unless, max_words)


def _read_table(text: str) -> object:
    return yaml.safe_load(text)


@functools.lru_cache(maxsize=1)
def _table() -> _Table:
    """:data:`TABLE_FILE`, read and compiled once.

    Raises:
        ValueError: a row that is not well formed, naming the file, the row and the field."""
    document = bundled_document(TABLE_FILE, _read_table)
    if not isinstance(document, dict):
        raise _table_error("the document", "needs commands, formats and pairs")
    names: set[str] = set()
    rows: dict[str, list[_CommandRow]] = {}
    sources: list[str] = []
    for section in ("commands", "formats", "pairs"):
        entries = document.get(section)
        if not isinstance(entries, list) or not entries:
            raise _table_error(section, "needs a list of rows")
        for index, raw in enumerate(entries):
            where = f"{section}[{index}]"
            if not isinstance(raw, dict):
                raise _table_error(where, "needs a mapping")
            name = raw.get("name")
            if not (isinstance(name, str) and _ROW_NAME.match(name)) or name in names:
                raise _table_error(where, f"needs a unique name of lower-case letters, digits and '-', not {name!r}")
            if not (isinstance(raw.get("source"), str) and raw["source"].strip()):
                raise _table_error(f"{where} ({name})", "needs a source")
            names.add(name)
            if section == "commands":
                programs, row = _command_row(raw, f"{where} ({name})")
                for program in programs:
                    rows.setdefault(program, []).append(row)
            elif section == "formats":
                _rows_pattern(raw.get("pattern"), f"{where} ({name}) pattern")
                sources.append(str(raw["pattern"]))
            else:
                _rows_pattern(raw.get("pattern"), f"{where} ({name}) pattern")
                _rows_pattern(raw.get("secret"), f"{where} ({name}) secret")
                if not isinstance(raw.get("mask_id"), bool):
                    raise _table_error(f"{where} ({name})", "mask_id needs true or false")
    pairs = tuple(_Pair(raw["pattern"], raw["secret"], raw["mask_id"]) for raw in document["pairs"])
    alternatives = "|".join(re.escape(program) for program in sorted(rows, key=lambda p: (-len(p), p)))
    start = r"(?:(?m:^)|[\s;&|(`'\"/=])"
    hint = "|".join([start + r"(?:" + alternatives + r")\s", *sources, *(raw["pattern"] for raw in document["pairs"])])
    return _Table(commands=_re2(r"(?P<pre>" + start + r")(?P<cmd>" + alternatives + r")\b"),
                  rows={program: tuple(found) for program, found in rows.items()},
                  formats=_re2(r"\b(?:" + "|".join(sources) + r")[0-9A-Za-z_-]*"), pairs=pairs, hint=hint)


def _mask_table_commands(block: str) -> str:
    """``block`` with every secret of :data:`TABLE_FILE`'s command rows masked: each program of
    a row where a command starts, read with the arguments after it up to the end of its shell
    command (``|``, ``;``, ``&``, a line break) and at most :data:`_ARGUMENTS_MAX_WORDS` of
    them, so a command written after another on one line is read too. The block's words are
    found in one scan, and the words inside a quoted word that holds a program (``bash -c
    'gh secret set …'``, ``printf %s 'docker login …'``) in one more, so the cost stays linear
    in the text however many programs it names."""
    table = _table()
    if table.commands.search(block) is None:
        return block
    ends = [found.start() for found in _COMMAND_END.finditer(block)]
    outer = _words(block, 0)
    outer_starts = [first for first, _last, _word in outer]
    inner: dict[int, tuple[list[tuple[int, int, str]], list[int]]] = {}
    spans: list[tuple[int, int]] = []
    for found in table.commands.finditer(block):
        at = found.end()
        if at >= len(block) or block[at] not in " \t\f\r":
            continue  # gh-foo, gh.txt: not the program
        words, starts = outer, outer_starts
        around = bisect.bisect_right(outer_starts, at) - 1
        if around >= 0 and outer[around][1] > at and outer[around][2][:1] in ("'", '"'):
            if around not in inner:  # the program is inside a quoted word: that word's own words
                first, last, _word = outer[around]
                found_inner = _words(block[first + 1:last - 1], first + 1)
                inner[around] = (found_inner, [start for start, _end, _text in found_inner])
            words, starts = inner[around]
        stop_at = bisect.bisect_left(ends, at)
        stop = ends[stop_at] if stop_at < len(ends) else len(block)
        index = bisect.bisect_left(starts, at)
        tokens = [(first, min(last, stop), word[:stop - first])
                  for first, last, word in words[index:index + _ARGUMENTS_MAX_WORDS] if first < stop]
        for row in table.rows.get(found.group("cmd"), ()):
            spans.extend(_row_secrets(row, tokens))
    if not spans:
        return block
    pieces, done = [], 0
    for first, last in sorted(set(spans)):
        if first < done:
            continue
        pieces.append(block[done:first])
        pieces.append(MASK)
        done = last
    pieces.append(block[done:])
    return "".join(pieces)


def _words(text: str, offset: int) -> list[tuple[int, int, str]]:
    """The words of ``text`` (:data:`_TOKEN`), each ``(start, end, word)``, its offsets those
    of the block ``text`` was cut from at ``offset``."""
    return [(offset + item.end() - len(item.group("tok")), offset + item.end(), item.group("tok"))
            for item in _TOKEN.finditer(text)]


#: Where a shell command's arguments end.
_COMMAND_END = _re2(r"[|;&\n]")
#: How many words after a program are read as its arguments.
_ARGUMENTS_MAX_WORDS = 64


def _looks_random(word: str) -> bool:
    """Two of upper case, lower case and digits, 8 characters or more: a generated secret's shape."""
    classes = sum(1 for test in (str.isupper, str.islower, str.isdigit) if any(test(c) for c in word))
    return len(word) >= 8 and classes >= 2


def _row_secrets(row: _CommandRow, tokens: list[tuple[int, int, str]]) -> Iterator[tuple[int, int]]:
    """The spans (in the arguments) of the secrets ``row`` names among ``tokens``."""
    if row.max_words is not None and len(tokens) > row.max_words:  # a sentence that starts so: random words only
        for first, _last, token in tokens[:row.max_words]:
            if _looks_random(token) and token != MASK:
                yield first, first + len(token)
        return
    start = 0
    for words in row.subcommand:  # in order, anywhere among the arguments
        start = next((i + 1 for i in range(start, len(tokens)) if tokens[i][2] in words), -1)
        if start < 0:
            return
    if row.operand:
        yield from _operand_secrets(row, tokens, start)
        return
    for index, (first, _last, token) in enumerate(tokens):
        for option in row.options:
            short = len(option) == 2 and option[1] != "-"
            if token == option and index + 1 < len(tokens) and not tokens[index + 1][2].startswith("-"):
                yield from _value_span(row, tokens[index + 1][0], tokens[index + 1][2])
            elif token.startswith(option + "="):
                yield from _value_span(row, first + len(option) + 1, token[len(option) + 1:])
            elif short and token.startswith(option) and len(token) > 2:
                yield from _value_span(row, first + 2, token[2:])


def _operand_secrets(row: _CommandRow, tokens: list[tuple[int, int, str]], start: int) -> Iterator[tuple[int, int]]:
    if row.after is not None:
        # the last word of the subcommand may be the one the secret follows (vercel env add NAME VALUE)
        start = next((i + 1 for i in range(max(start - 1, 0), len(tokens)) if row.after.fullmatch(tokens[i][2])), -1)
        if start < 0:
            return
    operands = [(first, token) for first, _last, token in tokens[start:] if not token.startswith("-")][row.skip:]
    for first, token in operands if row.every else operands[:1]:
        if row.unless is None or row.unless.fullmatch(token) is None:
            yield from _value_span(row, first, token)


def _value_span(row: _CommandRow, first: int, value: str) -> Iterator[tuple[int, int]]:
    """The span of the secret in ``value`` (at ``first``): inside its quotes, after the row's
    ``value_after``; nothing when that is missing, empty, a mask or a shell variable."""
    if len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]:
        first, value = first + 1, value[1:-1]
    if row.value_after is not None:
        at = value.find(row.value_after)
        if at < 0:
            return
        first, value = first + at + len(row.value_after), value[at + len(row.value_after):]
    if value and value != MASK and not value.startswith("$"):
        yield first, first + len(value)


@functools.lru_cache(maxsize=1)
def _hints() -> tuple[_Pattern, _Pattern]:
    """The hint pattern (:data:`_HINT_SOURCE` and the table's own: each program of
    :data:`TABLE_FILE` where a command starts, each format and each pair's identifier), and
    a hint with the rest of its line (one match a hinted line, however many hints it holds)."""
    source = _HINT_SOURCE + "|" + _table().hint
    return _re2(r"(?i)" + source), _re2(r"(?i)(?:" + source + r")[^\n]*")
#: How many times the lines a pass changed are read again (a mask can make a new match).
_ROUNDS = 4
#: How deep escaped JSON strings are decoded inside one another.
_DEPTH = 64


@functools.lru_cache(maxsize=1)
def _format_patterns() -> tuple[re.Pattern[str], ...]:
    """The token formats of the detect-secrets plugins named in :data:`_FORMAT_PLUGINS`, each
    extended to the whole token (a format's pattern may end before the token does), as the
    library writes them (Python ``re``); :func:`_format_matchers` matches them.

    Importing detect-secrets loads every plugin (about 0.15 s), so the patterns' sources and
    flags are kept by :func:`unstuck.core.cache.load_or_derive` under the installed library's
    identity (the path, size and modification time of each of its plugin files)."""
    patterns = load_or_derive("detect-secrets-formats", _library_identity(), _derive_formats, _parse_formats)
    return tuple(re.compile(f"(?:{source})[A-Za-z0-9_-]*", flags) for source, flags in patterns)


#: A negative look-ahead for a word character, which RE2 has no operator for.
_NOT_A_WORD_NEXT = re.compile(r"\(\?!\\w\)")
#: A counted repetition longer than RE2's limit of 1000.
_LONG_REPEAT = re.compile(r"\{(\d+),(\d{4,})\}")


@functools.lru_cache(maxsize=1)
def _format_matchers() -> tuple[Any, ...]:
    """:func:`_format_patterns` as RE2 patterns, which match in linear time: each flag written
    inline (``(?i)``, ``(?s)``, ``(?m)``), a ``(?!\\w)`` after a run dropped (the run then
    goes on to the token's end, so the same token, or a longer one, is masked: never less),
    and a repetition of more than RE2's 1000 left open (``{50,1024}`` is ``{50,}``). A pattern
    that still is not RE2's (a future plugin's look-around or backreference) is matched as
    the library wrote it, so no format is ever dropped."""
    found: list[Any] = []
    for pattern in _format_patterns():
        source = _NOT_A_WORD_NEXT.sub("", pattern.pattern)
        source = _LONG_REPEAT.sub(lambda m: "{" + m.group(1) + ",}", source)
        inline = "".join(flag for bit, flag in ((re.IGNORECASE, "i"), (re.DOTALL, "s"), (re.MULTILINE, "m"))
                         if pattern.flags & bit)
        verbose = bool(pattern.flags & re.VERBOSE) and re.search(r"\s|#", source) is not None
        try:
            if verbose:
                raise re2.error("a verbose pattern")
            found.append(_re2(f"(?{inline}){source}" if inline else source))
        except re2.error:
            found.append(pattern)
    return tuple(found)


def _library_identity() -> str:
    spec = importlib.util.find_spec("detect_secrets")
    if spec is None or spec.origin is None:
        return "missing"
    files = sorted(Path(spec.origin).parent.rglob("*.py"))
    digest = hashlib.sha256(",".join(_FORMAT_PLUGINS).encode())
    for path in files:
        try:
            stat = path.stat()
        except OSError:
            continue
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _derive_formats() -> list[list[object]]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    found: list[list[object]] = []
    plugins: list[type] = list(get_mapping_from_secret_type_to_class().values())
    for plugin in sorted(plugins, key=lambda p: p.__name__):
        if plugin.__name__ in _FORMAT_PLUGINS:
            found.extend([p.pattern, int(p.flags)] for p in getattr(plugin, "denylist", ()))
    return found


def _parse_formats(raw: object) -> list[tuple[str, int]] | None:
    if not isinstance(raw, list) or not raw:
        return None
    found: list[tuple[str, int]] = []
    for item in raw:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], int)
                and not isinstance(item[1], bool)):
            return None
        try:
            re.compile(item[0], item[1])
        except (re.error, ValueError, OverflowError):
            return None
        found.append((item[0], item[1]))
    return found


#: The authentication schemes of an ``Authorization`` header (RFC 9110 11.6.2): a word, never
#: the credentials (whose token the format patterns may have masked already).
_SCHEMES = frozenset({"bearer", "basic", "token", "digest"})


def _mask_credentials(match: _Match) -> str:
    if match.group("value").lower() in _SCHEMES:  # "Bearer ***": the scheme stays, the token is masked
        return str(match.group(0))
    return f"{match.group('name')}{MASK}"


#: Words that follow a secret's name in a tool's own sentence, as its state, not its value
#: ("access token: unknown terminal", "token: missing required scope", "password: not set"):
#: after ``NAME:`` in prose, unquoted, they are left as they are.
_STATE_WORDS = frozenset({
    "absent", "bad", "denied", "disabled", "empty", "expired", "false", "given", "invalid", "is", "malformed",
    "missing", "needed", "no", "none", "not", "null", "optional", "present", "provided", "redacted", "refused",
    "rejected", "required", "revoked", "set", "true", "undefined", "unknown", "unset", "was", "yes",
})


def _is_path(name: str, value: str) -> bool:
    """A path to a secret, not the secret (module doc)."""
    return _PATH_NAME.search(name) is not None and _PATH_VALUE.search(value) is not None


def _mask_group(match: _Match) -> str:
    name, value, sep, quote = match.group("name"), match.group("value"), match.get("sep") or "", match.get("quote")
    if value == MASK or _is_path(name, value):
        return str(match.group(0))
    if ":" in sep and not quote and value.lower().rstrip(".") in _STATE_WORDS:
        return str(match.group(0))  # the tool saying what state the secret is in
    return f"{name}{sep}{quote or ''}{MASK}"


def _mask_quoted(match: _Match) -> str:
    """A name and its quoted value (:func:`_quoted_value`): the value masked whole, quotes kept;
    a value shorter than four characters (``""``, ``"x"``, a mask) or a shell variable
    (``"$PW"``, ``"${PW}"``) left, as unquoted ones are."""
    index = next(i for i in range(6) if match.get(f"q{i}") is not None)
    quote, value, name = match.group(f"q{index}"), match.group(f"v{index}"), match.group("name")
    if len(value) < 4 or value.startswith("$") or value.strip() == MASK or _is_path(name, value):
        return str(match.group(0))
    return f"{name}{match.group('sep')}{quote}{MASK}{quote}"


def _mask_xml(match: _Match) -> str:
    tag, close, value = match.group("tag"), match.group("close"), match.group("value")
    if (close.lower() != tag.lower() or not value.strip() or value.strip() == MASK or value.lstrip().startswith("$")
            or _is_path(tag, value.strip())):
        return str(match.group(0))
    return f"<{tag}{match.group('attrs') or ''}>{MASK}</{close}>"


def _mask_url(match: _Match) -> str:
    if not match.group("value").strip("*"):  # masked already (pip writes ****)
        return str(match.group(0))
    return f"{match.group('name')}{MASK}@"


def _named(match: _Match) -> str:
    return f"{match.group('name')}{MASK}"


def redact(text: str) -> str:
    """``text`` with every secret found replaced by :data:`MASK` (see the module doc).

    Linear in ``len(text)`` (RE2 patterns, each line read a bounded number of times). Never
    raises; text that holds no secret comes back unchanged (the same string)."""
    return _redact_text(text, 0)


def _redact_text(text: str, depth: int) -> str:
    if not text:
        return text
    result = text
    if "PRIVATE KEY" in result:
        result = _PRIVATE_KEY.sub(f"-----BEGIN PRIVATE KEY----- {MASK} -----END PRIVATE KEY-----", result)
    for _ in range(_ROUNDS):
        decoded = result
        if "\\" in result and depth < _DEPTH:
            decoded = _JSON_LITERAL.sub(lambda m: _redact_literal(m, depth), result)
        lines = _hinted_lines(decoded)
        clean = _redact_lines(decoded, lines) if lines else decoded
        # a mask can make or unmake a string literal (a bad escape masked, quotes paired otherwise): again
        again, result = "\\" in clean and clean != result, clean
        if not again:
            break
    return text if result == text else result


def _redact_literal(match: _Match, depth: int) -> str:
    """A JSON string literal holding escapes: its decoded text redacted (a document in it as
    one), written again only when that changed something."""
    literal = str(match.group(0))
    try:
        decoded = json.loads(literal)
    except ValueError:
        return literal
    if not isinstance(decoded, str):
        return literal
    clean = _redact_string(decoded, depth + 1)
    return literal if clean == decoded else json.dumps(clean, ensure_ascii=False)


def _hinted(text: str) -> bool:
    try:
        return _hints()[0].search(text) is not None
    except UnicodeEncodeError:  # a lone surrogate (undecodable tool bytes): re2 reads UTF-8 only
        return _hints()[0].search(_utf8(text)) is not None


#: A lone surrogate (an undecodable byte a tool passed on as ``surrogateescape``).
_SURROGATE = re.compile("[\ud800-\udfff]")


def _utf8(text: str) -> str:
    """``text`` as RE2 can read it (UTF-8 only): each lone surrogate one U+FFFD, as the store
    engines keep it (:func:`unstuck.store.sqlite.clean_text`), so offsets stay."""
    return _SURROGATE.sub("\ufffd", text)


def _hinted_lines(text: str) -> list[tuple[int, int]]:
    """The start and end of each line of ``text`` that holds a hint (:func:`_hints`), in order,
    from one scan of the whole text (RE2 reads a text once per call, so one call, not one a line)."""
    try:
        matches = list(_hints()[1].finditer(text))
    except UnicodeEncodeError:  # a lone surrogate: the replacement characters are one character each too
        matches = list(_hints()[1].finditer(_utf8(text)))
    return [(text.rfind("\n", 0, match.start()) + 1, match.end()) for match in matches]


def _redact_lines(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the lines at ``spans`` redacted: together, joined by line breaks, so each
    pattern runs once over them all (no pattern matches across a line break: :func:`_re2`)."""
    lines = [text[first:last] for first, last in spans]
    todo = list(range(len(lines)))
    for _ in range(_ROUNDS):  # a mask can make a new match (a name now next to a value): again, until none
        block = "\n".join(lines[i] for i in todo)
        try:
            clean = _redact_block(block)
        except UnicodeEncodeError:  # a lone surrogate: redacted as its replacement characters (RE2 reads UTF-8)
            clean = _redact_block(_utf8(block))
        if clean == block:
            break
        redone = clean.split("\n")
        if len(redone) != len(todo):  # never: no replacement adds or removes a line break
            redone = [_redact_block(_utf8(lines[i])) for i in todo]
        changed = [(i, line) for i, line in zip(todo, redone, strict=True) if line != lines[i]]
        for i, line in changed:
            lines[i] = line
        todo = [i for i, _line in changed]
        if not todo:
            break
    pieces, done = [], 0
    for (first, last), line in zip(spans, lines, strict=True):
        pieces.append(text[done:first])
        pieces.append(line)
        done = last
    pieces.append(text[done:])
    return "".join(pieces)


def _redact_block(block: str) -> str:
    """Lines (joined by line breaks) with every secret masked: what is a property of a whole
    line (a netrc or ``.pgpass`` line) line by line, where one might be; every other pattern
    once over the block."""
    if "password" in block or ":" in block:
        block = "\n".join(_redact_whole_line(line) for line in block.split("\n"))
    if "_auth" in block:
        block = _NPMRC_AUTH.sub(_named, block)
    for pair in _table().pairs:  # before an identifier alone is masked
        block = pair.sub(block)
    block = _table().formats.sub(MASK, block)
    block = _DOCUMENTED_FORMATS.sub(MASK, block)  # first: detect-secrets' GitLab pattern stops at a routable tail
    for pattern in _format_matchers():
        block = pattern.sub(MASK, block)
    block = _AUTHORIZATION.sub(_mask_credentials, block)
    block = _CREDENTIAL_HEADER.sub(_named, block)
    if "://" in block or ":\\/" in block:
        block = _URL_PASSWORD.sub(_mask_url, block)
    block = _DOCKER_AUTH.sub(lambda m: f"{m.group('name')}{MASK}{m.group('end')}", block)
    if "password" in block:
        block = _NETRC_QUOTED.sub(_named, block)
        block = _NETRC_INLINE.sub(lambda m: m.group(0) if m.group("value") == MASK else _named(m), block)
    if ":" in block:
        block = _PGPASS_WORD.sub(_mask_pgpass_word, block)
    if "<" in block:
        block = _XML_ELEMENT.sub(_mask_xml, block)
    block = _COMMAND.sub(_mask_command, block)
    block = _mask_table_commands(block)
    if "--" in block:
        block = _OPTION_QUOTED.sub(_mask_quoted, block)
        block = _OPTION.sub(_mask_group, block)
    for pattern in _ASSIGNED_QUOTED:
        block = pattern.sub(_mask_quoted, block)
    block = _ASSIGNED.sub(_mask_group, block)
    return str(_SPACED.sub(_mask_group, block))


def _mask_pgpass_word(match: _Match) -> str:
    text, start, end = match.string, match.start(), match.end()
    if (start > 0 and text[start - 1] in ":\\") or text[end:end + 1] == ":" or match.group("value") == MASK:
        return str(match.group(0))  # a longer chain of colons (an IPv6 address, a MAC), not five fields
    return _named(match)


def _redact_whole_line(line: str) -> str:
    """A netrc(5) line's password, or a ``.pgpass`` line's (patterns that must match the whole line)."""
    if "password" in line and _NETRC_LINE.fullmatch(line):
        return str(_NETRC_PASSWORD.sub(_named, line))
    if ":" in line and not line.lstrip().startswith("#"):
        entry = _PGPASS_LINE.fullmatch(line)
        if entry is not None:
            return _named(entry)
    return line


def _mask_command(match: _Match) -> str:
    command, args = match.group("cmd"), match.group("args")
    if command == "curl":
        args = _CURL_USER.sub(_mask_group, args)
    elif command == "sshpass":
        args = _SSHPASS_PASSWORD.sub(_mask_argument, args, count=1)
    else:
        args = _MYSQL_PASSWORD.sub(_mask_argument, args)
    return f"{match.group('pre') or ''}{command}{args}"


def redact_value(value: Any, *, depth: int = 0) -> Any:
    """A JSON-like value (str, list, dict, scalars) with every string redacted, keys too, and
    the values of keys named like secrets masked whole (an ``Authorization`` key's keeps its
    scheme, RFC 9110 11.6.2); a string that is itself a JSON document (an object or an
    array, such as a tool call's arguments inside a message) is redacted as one, so it still
    parses. Two keys that are the same once redacted are kept apart: the second is
    ``KEY#2``, the next ``KEY#3``. Containers nested deeper than 64 levels come back as a
    masked marker (never a recursion error)."""
    if depth > _DEPTH:
        return MASK
    if isinstance(value, str):
        return _redact_string(value, depth)
    if isinstance(value, Mapping):
        clean: dict[Any, Any] = {}
        for key, item in value.items():
            shown = _shown_key(key, depth) if isinstance(key, str) else key
            if shown in clean:
                count = 2
                while f"{shown}#{count}" in clean:
                    count += 1
                shown = f"{shown}#{count}"
            clean[shown] = _masked_item(key, item, depth)
        return clean
    if isinstance(value, list | tuple):
        items: Iterable[Any] = value
        return [_redact_inner(v, depth + 1) for v in items]
    return value


#: Keys redaction left as they were, remembered (a schema's field names: a saved guard state's
#: policy writes ``allowed_credential_changes`` and ``key`` each time, and a word that holds a
#: hint costs a whole reading): only a key that cannot be a JSON document or hold an escape, so
#: its reading does not depend on its depth; at most :data:`_CLEAN_KEYS_KEPT` of at most
#: :data:`_CLEAN_KEY_MAX` characters. A key that held a secret is never kept here.
_CLEAN_KEYS: set[str] = set()
_CLEAN_KEYS_KEPT = 4096
_CLEAN_KEY_MAX = 64


def _shown_key(key: str, depth: int) -> str:
    """A mapping's key as :func:`redact_value` writes it (:func:`_redact_string`)."""
    if key in _CLEAN_KEYS:
        return key
    shown = _redact_string(key, depth)
    if (shown == key and len(key) <= _CLEAN_KEY_MAX and len(_CLEAN_KEYS) < _CLEAN_KEYS_KEPT and "\\" not in key
            and key.lstrip()[:1] not in ("{", "[")):
        _CLEAN_KEYS.add(key)
    return shown


#: How deep inside a value :func:`_redact_inner` still looks for a container to keep whole;
#: deeper, each value is read on its own (so a hint deep down costs at most this many
#: serialisations of the containers above it).
_WHOLE_DEPTH = 4


def _redact_inner(value: Any, depth: int) -> Any:
    """:func:`redact_value` of a value inside another, at ``depth``: a ``dict``, ``list`` or
    ``tuple`` near the top that holds nothing to redact comes back as it is, the same object
    (:func:`_nothing_to_redact`), so a large clean part (a saved guard's steps) costs one
    serialisation and one scan instead of one reading per string."""
    if depth <= _WHOLE_DEPTH and isinstance(value, dict | list | tuple) and value and _nothing_to_redact(value, depth):
        return value
    return redact_value(value, depth=depth)


def redacted_json(value: Any, *, depth: int = 0, sort_keys: bool = False,
                  separators: tuple[str, str] | None = None, ensure_ascii: bool = True) -> str:
    """``json.dumps(redact_value(value, depth=depth), ...)`` with these options, the same text,
    from one serialisation of ``value`` when nothing in it needs redacting (the shortcut
    :func:`redact_value` takes for a clean container: its JSON text scanned once for what
    redaction looks for), else from :func:`redact_value`'s result.

    ``depth``: how deep ``value`` sits in the document it is part of (a part redacted on its
    own is redacted as it is in its place there).

    Raises:
        TypeError, ValueError: as ``json.dumps`` does, for a value it cannot write."""
    return redacted_json_each([value], depth=depth, sort_keys=sort_keys, separators=separators,
                              ensure_ascii=ensure_ascii)[0]


def redacted_json_each(values: Sequence[Any], *, depth: int = 0, sort_keys: bool = False,
                       separators: tuple[str, str] | None = None, ensure_ascii: bool = True) -> list[str]:
    """:func:`redacted_json` of each of ``values`` (the same texts), their JSON texts scanned
    for a hint of a secret together, in one scan (the lines of one text: a JSON text holds no
    line break, and a hint is found at a line's start as at a text's), so a thousand small
    values cost one scan, not a thousand.

    Raises:
        TypeError, ValueError: as ``json.dumps`` does, for a value it cannot write."""
    texts: list[str | None] = []
    encode = _encoder(sort_keys, separators).encode  # json.dumps's, made once for the lot
    for value in values:
        text = None
        if isinstance(value, dict | list | tuple) and value:
            try:
                text = encode(value)
            except (TypeError, ValueError, RecursionError):
                text = None
        texts.append(text)
    hinted = _hinted_texts([text or "" for text in texts])
    written: list[str] = []
    for i, (value, text) in enumerate(zip(values, texts, strict=True)):
        if text is not None and i not in hinted and _clean_but_hints(text, value, depth):
            written.append(text if not ensure_ascii or text.isascii()
                           else json.dumps(value, sort_keys=sort_keys, separators=separators))
        else:
            written.append(json.dumps(redact_value(value, depth=depth), ensure_ascii=ensure_ascii,
                                      sort_keys=sort_keys, separators=separators))
    return written


@functools.lru_cache(maxsize=8)
def _encoder(sort_keys: bool, separators: tuple[str, str] | None) -> json.JSONEncoder:
    """The encoder ``json.dumps(..., ensure_ascii=False, sort_keys=..., separators=...)`` makes
    for itself at each call."""
    return json.JSONEncoder(ensure_ascii=False, sort_keys=sort_keys, separators=separators)


def _hinted_texts(texts: list[str]) -> set[int]:
    """The positions of the ``texts`` (none holding a line break) that hold a hint
    (:func:`_hints`): one scan of them joined by line breaks (a hint found across a break
    counts for both sides)."""
    if len(texts) == 1:
        return {0} if _hinted(texts[0]) else set()
    joined = "\n".join(texts)
    starts, at = [], 0
    for text in texts:
        starts.append(at)
        at += len(text) + 1
    try:
        spans = [(m.start(), m.end()) for m in _hints()[0].finditer(joined)]
    except UnicodeEncodeError:  # a lone surrogate: the replacement characters are one character each too
        spans = [(m.start(), m.end()) for m in _hints()[0].finditer(_utf8(joined))]
    found: set[int] = set()
    for first, last in spans:
        found.update(range(bisect.bisect_right(starts, first) - 1, bisect.bisect_right(starts, max(first, last - 1))))
    return found


def _nothing_to_redact(value: dict[Any, Any] | list[Any] | tuple[Any, ...], depth: int) -> bool:
    """Whether :func:`redact_value` would give ``value`` back unchanged (keys, strings and
    nesting), read from its JSON text in one scan instead of one reading per string.

    The text (``json.dumps``, non-ASCII kept) holds every key and string of ``value``, each
    between quotes with ``"``, ``\\`` and control characters escaped; no hint
    (:data:`_HINT`) of a string is lost there (each hint is a run of letters, digits and
    punctuation other than those), a backslash in a string shows as ``\\\\``, so one before a
    ``u`` or a ``/`` still shows as ``\\u`` or ``\\/``, and a key named like a secret holds
    a hint. So text with none of what :func:`_redact_string` looks for holds no string
    that redaction would change. What the scan cannot tell is read on: the nesting
    (:data:`_DEPTH`: a container that deep is masked) and a value ``json.dumps`` refuses
    (then the value is read string by string, as before)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return False
    return _clean_text(text, value, depth)


def _clean_text(text: str, value: Any, depth: int) -> bool:
    """Whether ``value``, at ``depth``, whose JSON text (non-ASCII kept; any separators and
    key order: a hint lies inside one string, and a match across two only reads on) is
    ``text``, holds nothing to redact (:func:`_nothing_to_redact`)."""
    return not _hinted(text) and _clean_but_hints(text, value, depth)


def _clean_but_hints(text: str, value: Any, depth: int) -> bool:
    """:func:`_clean_text` for a text known to hold no hint: no escape that may hide one, no
    private key block, and nothing nested past the masking depth."""
    if "PRIVATE KEY" in text or "\\u" in text or "\\/" in text:
        return False
    levels = _DEPTH - depth
    return text.count("[") + text.count("{") <= levels or not deeper_than(value, levels)


#: Keys whose value is an HTTP credential: ``Authorization`` and ``Proxy-Authorization`` (RFC
#: 9110 11.6.2 and 11.7.2: ``auth-scheme [ 1*SP ( token68 / #auth-param ) ]``, the scheme kept),
#: ``Cookie`` and ``Set-Cookie`` (RFC 6265 5.4 and 4.1: the whole value).
_AUTHORIZATION_KEYS = frozenset({"authorization", "proxy-authorization"})
_COOKIE_KEYS = frozenset({"cookie", "set-cookie"})
_AUTH_SCHEME = _re2(r"\A\s*(?P<scheme>[!#$%&'*+.^_`|~0-9A-Za-z-]+)\s+\S")


def _masked_item(key: Any, item: Any, depth: int) -> Any:
    if isinstance(key, str) and isinstance(item, str) and item:
        lowered = key.lower()
        if lowered in _AUTHORIZATION_KEYS:
            scheme = _AUTH_SCHEME.match(item)
            return f"{scheme.group('scheme')} {MASK}" if scheme and item.strip() != MASK else MASK
        if lowered in _COOKIE_KEYS or _is_secret_name(key):
            return MASK
    return _redact_inner(item, depth + 1)


def redact_document(text: str) -> str:
    """``text`` as it may be stored or shown: a JSON document (an object or an array: a
    journaled message, a call's arguments, a situation, a receipt) with every string in it
    redacted (:func:`redact_value`, keys too) and written again (``json.dumps``, non-ASCII
    kept) when something changed, so it still parses; any other text redacted as text
    (:func:`redact`). This is the one function the store boundary
    (:func:`unstuck.store.engines.clean_params`) and the output boundary (:mod:`unstuck.core.output`)
    apply. Never raises; text that holds no secret comes back unchanged (the same string)."""
    return _redact_string(text, 0)


def redacted_prefix(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text`` as a store keeps them: redacted
    (:func:`redact_document`) before the cut, so a cut never keeps the head of a secret that
    the whole text shows as one (a token cut short may no longer look like one)."""
    return redact_document(text)[:limit]


def _redact_string(text: str, depth: int) -> str:
    if not text:
        return text
    # an escape may hide any hint: \u0067hp_ is ghp_, https:\/\/ is https://
    if not (_hinted(text) or "PRIVATE KEY" in text or "\\u" in text or "\\/" in text):
        return text
    if text.lstrip()[:1] in ("{", "["):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return _redact_text(text, depth)
        if isinstance(value, dict | list):
            clean = redact_value(value, depth=depth + 1)
            return text if clean == value else json.dumps(clean, ensure_ascii=False)
    return _redact_text(text, depth)


_NAME_ONLY = _re2(r"(?i)" + _SECRET_NAME)


def _is_secret_name(name: str) -> bool:
    """A key whose value is a secret: a name that says so (:data:`_SECRET_NAME`), or Docker's
    ``config.json`` ``auth`` (base64 of user:password; docs.docker.com, "docker login"), which
    :data:`_DOCKER_AUTH` finds in text."""
    try:
        return _NAME_ONLY.fullmatch(name) is not None or name.lower() == "auth"
    except UnicodeEncodeError:
        return _NAME_ONLY.fullmatch(_utf8(name)) is not None
