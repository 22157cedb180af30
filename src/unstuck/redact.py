"""Secrets never stored or shown (issue 12, deliver 5; issue 23, deliver 3): what a secret is,
and the functions the two boundaries apply, so no table, field or command redacts on its own:
the store boundary (:func:`unstuck.engines.clean_params`: every string every journal and
lesson statement is given) and the output boundary (:mod:`unstuck.output`: every command's
streams, its JSON documents, files and HTML pages), both through :func:`redact_document`
(events pass it in :meth:`unstuck.guard.Guard.emit`). The model still sees what the tool returned.

These secrets are found:

* **tokens of known formats**, by the detectors of Yelp's ``detect-secrets`` library (its
  plugins' ``denylist`` patterns: GitHub, GitLab, AWS access keys, OpenAI, Slack, Stripe,
  SendGrid, npm, PyPI, Telegram, Discord, Mailchimp, Square, Azure storage keys, JSON Web
  Tokens), plus PEM private-key blocks (RFC 7468: ``-----BEGIN … PRIVATE KEY-----`` to its
  ``END`` line);
* **values given to names that say they are secret**: ``GH_TOKEN=…``, ``password: …``,
  ``"api_key": "…"``, ``--token …``, an ``Authorization`` header's credentials (RFC 9110
  section 11.6.2; Bearer, RFC 6750; Basic, RFC 7617), and the password of a URL's userinfo
  (RFC 3986 section 3.2.1; ``psql "postgresql://u:SECRET@h/db"`` too);
* **token formats detect-secrets has no plugin for** (its ``NpmDetector`` matches only an
  ``.npmrc`` ``_authToken=`` line, and version 1.5.0 has none for Hugging Face): npm access
  tokens, ``npm_`` and 36 letters or digits (docs.npmjs.com, "About access tokens"), Hugging
  Face user access tokens, ``hf_`` and 34 or more letters (huggingface.co/docs, "User access
  tokens"), and an ``.npmrc``'s ``_authToken=``/``_auth=`` value with its registry kept
  (docs.npmjs.com, "npmrc"); SendGrid keys (``SG.``, 22, ``.``, 43; SendGrid docs, "API Keys") come from
  detect-secrets' own ``SendGridDetector``; and the other documented shapes of
  :data:`_DOCUMENTED_FORMATS` (GitHub fine-grained, Slack app-level and configuration tokens,
  OpenAI and Anthropic keys, Google API keys, Stripe test keys, GitLab routable tokens, Square,
  Databricks, Docker Hub, DigitalOcean, age), each with its issuer's page;
* **credential files and variables**: a ``.netrc`` line's password (netrc(5): the token after
  ``password`` on a line made of netrc's ``machine``/``default``/``login``/``password``/
  ``account``/``port`` tokens, such a line quoted inside a command, or ``machine NAME login
  NAME password VALUE`` within a line), a Docker ``config.json``'s ``"auth"`` (base64 of user:password)
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
  ``user:password``; a user without ``:`` makes curl prompt, nothing to mask). Only the
  password is masked: the user, the options and the command stay.

A value given to a name that ends in ``file``, ``path`` or ``dir`` (``--password-file=/run/pw``,
``POSTGRES_PASSWORD_FILE=/run/secrets/db``) that looks like a path (holds ``/`` or ``\\``, or
starts with ``~`` or ``.``) is a path to a secret, not the secret: it stays, since the path is
what a reader needs to follow a "no such file" error.

Each secret is replaced by :data:`MASK` (the name and the structure around it stay, so a
reader can still tell what happened). :func:`redact` is linear in its input and never raises.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import re2

from unstuck.cache import load_or_derive

__all__ = ["MASK", "redact", "redact_document", "redact_value", "redacted_prefix"]

#: What a secret is replaced with.
MASK = "***"

#: The detect-secrets plugins whose patterns are formats of a token (not entropy guesses, not
#: keyword heuristics, not IP addresses): their matches are always secrets.
_FORMAT_PLUGINS = (
    "AWSKeyDetector", "AzureStorageKeyDetector", "DiscordBotTokenDetector", "GitHubTokenDetector",
    "GitLabTokenDetector", "JwtTokenDetector", "MailchimpDetector", "NpmDetector", "OpenAIDetector",
    "PypiTokenDetector", "SendGridDetector", "SlackDetector", "SquareOAuthDetector", "StripeDetector",
    "TelegramBotTokenDetector",
)

#: A name that says its value is secret (environment variables, config keys, JSON fields, options).
#: Names ending in ``_PWD`` (``MYSQL_PWD``: MySQL reference manual, "Environment Variables")
#: and ``SSHPASS`` (sshpass(1), ``-e``) are documented secret variables too.
#: The secret word ends the name (``GITHUB_TOKEN``, ``db_password``, ``token2``; or names the
#: file that holds it, ``--password-file``: a path is then kept, see :data:`_PATH_NAME`), so a name that
#: only starts with one (``token_scopes``, ``password_policy``, ``secret_name``) says nothing of
#: its value.
_SECRET_NAME = (r"[A-Za-z0-9_.-]*(?:token|secret|passw(?:or)?d|passphrase|api[_-]?key|access[_-]?key"
                r"|private[_-]?key|client[_-]?secret|credentials?|auth[_-]?key|_pwd|(?-i:SSHPASS))[0-9]*"
                r"(?:[-_.](?:file|path|dir))?(?![A-Za-z0-9_])")
#: ``NAME=value``, ``NAME: value``, ``"NAME": "value"``, ``--name value`` / ``--name=value``.
_ASSIGNED = re.compile(
    r"""(?P<name>["']?\b""" + _SECRET_NAME + r"""\b["']?)(?P<sep>\s*[=:]\s*|\s+(?=["']))(?P<quote>["']?)"""
    r"""(?P<value>[^\s"',;}&$][^\s"',;}&]{3,})""",
    re.IGNORECASE,
)
_OPTION = re.compile(r"(?P<name>--" + _SECRET_NAME + r")(?P<sep>=|\s+)(?P<value>[^\s\"',;$-][^\s\"',;]{3,})",
                     re.IGNORECASE)
#: ``Authorization: Bearer X`` / ``Basic X`` / ``token X`` (RFC 9110 11.6.2).
_AUTHORIZATION = re.compile(r"(?P<name>(?:proxy-)?authorization\s*[:=]\s*[\"']?(?:bearer|basic|token|digest)?\s*)"
                            r"(?P<value>[^\s\"',;]{4,})", re.IGNORECASE)
#: Headers whose whole value is a credential: GitLab's ``PRIVATE-TOKEN`` (docs.gitlab.com, REST
#: API authentication), ``X-API-Key``/``api-key``, ``X-Auth-Token``, ``Cookie`` (RFC 6265 5.4).
_CREDENTIAL_HEADER = re.compile(r"(?P<name>(?:private-token|x-api-key|api-key|x-auth-token|cookie)[\"']?\s*:\s*[\"']?)"
                                r"(?P<value>[^\s\"',}]+)", re.IGNORECASE)
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
_DOCUMENTED_FORMATS = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xapp-[A-Za-z0-9-]{10,}|"
    r"xoxe(?:\.xox[a-z])?-[A-Za-z0-9-]{10,}|"
    r"sk-(?:ant-)?[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{30,}|npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])|hf_[A-Za-z]{34,}|"
    r"[sr]k_test_[0-9A-Za-z]{24,}|"
    r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-[A-Za-z0-9_-]{20,}(?:\.[0-9]{2}\.[0-9a-z]{9}(?![0-9a-z]))?|"
    r"EAAA[A-Za-z0-9_-]{60,}|dapi[0-9a-f]{32}(?:-[0-9]+)?(?![0-9a-f])|dckr_pat_[A-Za-z0-9_-]{20,}|"
    r"do[por]_v1_[0-9a-f]{64}|AGE-SECRET-KEY-1[0-9A-Z]{58})")
#: An ``.npmrc``'s ``_authToken=`` / ``_auth=`` (docs.npmjs.com, "npmrc": auth-related
#: configuration), masked before detect-secrets' ``NpmDetector`` (whose match is the whole
#: line) so the registry stays.
_NPMRC_AUTH = re.compile(r"(?P<name>(?:^|(?<=[\s:/]))_auth(?:Token)?\s*=\s*)(?P<value>[^\s\"']+)")
#: A Docker ``config.json``'s ``"auth"`` value (base64 of ``user:password``; docs.docker.com,
#: "docker login"), quoted key and quoted value: plain ``auth: failed`` is left alone.
_DOCKER_AUTH = re.compile(r'(?P<name>"auth"\s*:\s*")(?P<value>[^"\s]+)(?=")', re.IGNORECASE)
#: A line made only of netrc(5) tokens (``machine NAME``, ``default``, ``login NAME``,
#: ``password STRING``, ``account STRING``, ``port N``): its ``password`` token's value.
_NETRC_LINE = re.compile(r"\s*(?:(?:machine|login|password|account|port)\s+\S+|default)"
                         r"(?:\s+(?:(?:machine|login|password|account|port)\s+\S+|default))*\s*")
_NETRC_PASSWORD = re.compile(r"(?P<name>(?:^|(?<=\s))password\s+)(?P<value>\S+)")
#: A netrc line quoted inside a longer line (``printf 'machine h login u password p' >> ~/.netrc``):
#: from the quote, netrc(5) tokens up to ``password`` and its value, which ends at the quote.
#: netrc(5)'s ``machine NAME login NAME password VALUE`` (or ``default login …``) inside a line
#: of prose or a command: the full sequence, ``login`` included, so ordinary words are left.
_NETRC_INLINE = re.compile(r"(?P<name>\b(?:machine\s+\S+|default)\s+login\s+\S+\s+password\s+)(?P<value>[^\s'\"]+)")
_NETRC_QUOTED = re.compile(r"(?P<name>(?P<q>['\"])\s*(?:machine\s+[^\s'\"]+|default)"
                           r"(?:\s+(?:machine|login|account|port)\s+[^\s'\"]+)*\s+password\s+)"
                           r"(?P<value>[^\s'\"]+)(?=\s|(?P=q))")
#: A command that takes a password on its command line, and its arguments up to the end of the
#: shell command (``|``, ``;``, ``&``, a newline).
_COMMAND = re.compile(r"(?:^|(?<=[\s;&|(`'\"/=]))(?P<cmd>curl|sshpass|mysql|mariadb|mysql(?:dump|admin|import|show"
                      r"|check|slap)|mariadb-(?:dump|admin|import|show|check|slap))(?P<args>(?=\s)[^|;&\n]*)")
#: mysql(1): ``-pSECRET`` (no space) and ``--password=SECRET``.
_MYSQL_PASSWORD = re.compile(r"(?P<name>(?<=\s)(?:-p|--password=))(?P<quote>['\"]?)(?P<value>[^\s'\"]+)")
#: sshpass(1): ``-p PASSWORD`` / ``-pPASSWORD`` among sshpass's options (``-f FILE``, ``-d FD``,
#: ``-P PROMPT``, ``-e[VAR]``, ``-v``, ``-h``, ``-V``), which end at the command it runs.
_SSHPASS_PASSWORD = re.compile(r"\A(?P<name>(?:\s+-(?:[fdP]\s*[^\s-]\S*|e\S*|[vhV]+))*\s+-p\s*)"
                               r"(?P<quote>['\"]?)(?P<value>[^\s'\"]+)")
#: curl(1): ``-u user:password`` / ``--user`` / ``-U`` / ``--proxy-user`` (``-uuser:password`` too).
_CURL_USER = re.compile(r"(?P<name>(?<=\s)(?:-u|-U|--user|--proxy-user)(?:\s+|=)?['\"]?[^\s:'\"]*:)"
                        r"(?P<value>[^\s'\"]+)")
#: A name for a path to a secret (``--password-file``), and a value that looks like a path.
_PATH_NAME = re.compile(r"[-_.](?:file|path|dir)[\"']?$", re.IGNORECASE)
_PATH_VALUE = re.compile(r"\A[~.]|[/\\]")
#: ``scheme://user:password@host`` (RFC 3986 3.2.1).
_URL_PASSWORD = re.compile(r"(?P<name>[a-z][a-z0-9+.-]*://[^\s:/?#@]+:)(?P<value>[^\s/?#@]+)(?=@)", re.IGNORECASE)
#: A PEM private key block (RFC 7468), whole.
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY( BLOCK)?-----.*?(-----END [A-Z ]*PRIVATE KEY( BLOCK)?-----|\Z)", re.DOTALL)
#: Words that every secret this module finds has near it: a line without one is left as it is
#: (most tool output), so redaction costs one scan of the text.
_HINT = re2.compile(r"(?i)token|secret|passw|passphrase|key|auth|cred|://[^\s/@]*:[^\s/@]*@|ghp_|gho_|ghu_|ghs_|ghr_|glpat|"
                   r"gl[a-z]+-|akia|asia|abia|acca|a3t|eyj|xox|hooks\.slack|sk-|sk_live|rk_live|sg\.|npm_|pypi-|sq0csp|"
                   r"-us\d|\d{8,10}:|[mno][a-z\d_-]{23,25}\.|github_pat_|xapp-|aiza|cookie|hf_|_pwd|sshpass|mysql|mariadb|curl|"
                   r"sk_test_|rk_test_|eaaa|dapi|dckr_pat_|_v1_")
#: Longer texts are redacted in pieces of this many characters (overlapping), so one huge
#: output costs linear time.
_CHUNK = 1 << 20


@functools.lru_cache(maxsize=1)
def _format_patterns() -> tuple[re.Pattern[str], ...]:
    """The token formats of the detect-secrets plugins named in :data:`_FORMAT_PLUGINS`, each
    extended to the whole token (a format's pattern may end before the token does).

    Importing detect-secrets loads every plugin (about 0.15 s), so the patterns' sources and
    flags are kept by :func:`unstuck.cache.load_or_derive` under the installed library's
    identity (the path, size and modification time of each of its plugin files)."""
    patterns = load_or_derive("detect-secrets-formats", _library_identity(), _derive_formats, _parse_formats)
    return tuple(re.compile(f"(?:{source})[A-Za-z0-9_-]*", flags) for source, flags in patterns)


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


def _mask_credentials(match: re.Match[str]) -> str:
    if match.group("value").lower() in _SCHEMES:  # "Bearer ***": the scheme stays, the token is masked
        return match.group(0)
    return f"{match.group('name')}{MASK}"


#: Words that follow a secret's name in a tool's own sentence, as its state, not its value
#: ("access token: unknown terminal", "token: missing required scope", "password: not set"):
#: after ``NAME:`` in prose, unquoted, they are left as they are.
_STATE_WORDS = frozenset({
    "absent", "bad", "denied", "disabled", "empty", "expired", "false", "given", "invalid", "is", "malformed",
    "missing", "needed", "no", "none", "not", "null", "optional", "present", "provided", "redacted", "refused",
    "rejected", "required", "revoked", "set", "true", "undefined", "unknown", "unset", "was", "yes",
})


def _mask_group(match: re.Match[str]) -> str:
    if _PATH_NAME.search(match.group("name")) and _PATH_VALUE.search(match.group("value")):
        return match.group(0)  # a path to a secret, not the secret (module doc)
    groups = match.groupdict()
    if (":" in (groups.get("sep") or "") and not groups.get("quote")
            and match.group("value").lower().rstrip(".") in _STATE_WORDS):
        return match.group(0)  # the tool saying what state the secret is in
    return f"{match.group('name')}{match.groupdict().get('sep') or ''}{match.groupdict().get('quote') or ''}{MASK}"


def redact(text: str) -> str:
    """``text`` with every secret found replaced by :data:`MASK` (see the module doc).

    Never raises; text that holds no secret comes back unchanged (the same string)."""
    if not text:
        return text
    if len(text) > _CHUNK:
        return "".join(redact(text[i:i + _CHUNK]) for i in range(0, len(text), _CHUNK))
    result = text
    if "PRIVATE KEY" in result:
        result = _PRIVATE_KEY.sub(f"-----BEGIN PRIVATE KEY----- {MASK} -----END PRIVATE KEY-----", result)
    if not _hinted(result):
        return text if result == text else result
    lines = result.split("\n")
    for index, line in enumerate(lines):
        if _hinted(line):
            lines[index] = _redact_line(line)
    result = "\n".join(lines)
    return text if result == text else result


def _hinted(text: str) -> bool:
    try:
        return _HINT.search(text) is not None
    except UnicodeEncodeError:  # a lone surrogate (undecodable tool bytes): re2 reads UTF-8 only
        return _HINT.search(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")) is not None


def _redact_line(line: str) -> str:
    if "_auth" in line:
        line = _NPMRC_AUTH.sub(lambda m: f"{m.group('name')}{MASK}", line)
    line = _DOCUMENTED_FORMATS.sub(MASK, line)  # first: detect-secrets' GitLab pattern stops at a routable tail
    for pattern in _format_patterns():
        line = pattern.sub(MASK, line)
    line = _AUTHORIZATION.sub(_mask_credentials, line)
    line = _CREDENTIAL_HEADER.sub(lambda m: f"{m.group('name')}{MASK}", line)
    line = _URL_PASSWORD.sub(lambda m: f"{m.group('name')}{MASK}", line)
    line = _DOCKER_AUTH.sub(lambda m: f"{m.group('name')}{MASK}", line)
    if "password" in line:
        if _NETRC_LINE.fullmatch(line):
            line = _NETRC_PASSWORD.sub(lambda m: f"{m.group('name')}{MASK}", line)
        line = _NETRC_QUOTED.sub(lambda m: f"{m.group('name')}{MASK}", line)
        line = _NETRC_INLINE.sub(lambda m: m.group(0) if m.group("value") == MASK else f"{m.group('name')}{MASK}", line)
    line = _COMMAND.sub(_mask_command, line)
    line = _OPTION.sub(_mask_group, line)
    return _ASSIGNED.sub(lambda m: m.group(0) if m.group("value") == MASK else _mask_group(m), line)


def _mask_command(match: re.Match[str]) -> str:
    command, args = match.group("cmd"), match.group("args")
    if command == "curl":
        args = _CURL_USER.sub(_mask_group, args)
    elif command == "sshpass":
        args = _SSHPASS_PASSWORD.sub(_mask_group, args, count=1)
    else:
        args = _MYSQL_PASSWORD.sub(_mask_group, args)
    return f"{command}{args}"


def redact_value(value: Any, *, depth: int = 0) -> Any:
    """A JSON-like value (str, list, dict, scalars) with every string redacted, and the
    values of keys named like secrets masked whole; a string that is itself a JSON document
    (an object or an array, such as a tool call's arguments inside a message) is redacted as
    one, so it still parses. Containers nested deeper than 64 levels come back as a masked
    marker (never a recursion error)."""
    if depth > 64:
        return MASK
    if isinstance(value, str):
        return _redact_string(value, depth)
    if isinstance(value, Mapping):
        return {k: (MASK if isinstance(k, str) and _is_secret_name(k) and isinstance(v, str) and v
                    else redact_value(v, depth=depth + 1)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items: Iterable[Any] = value
        return [redact_value(v, depth=depth + 1) for v in items]
    return value


def redact_document(text: str) -> str:
    """``text`` as it may be stored or shown: a JSON document (an object or an array: a
    journaled message, a call's arguments, a situation, a receipt) with every string in it
    redacted (:func:`redact_value`) and written again (``json.dumps``, non-ASCII kept) when
    something changed, so it still parses; any other text redacted as text (:func:`redact`).
    This is the one function the store boundary (:func:`unstuck.engines.clean_params`) and the
    output boundary (:mod:`unstuck.output`) apply. Never raises; text that holds no secret
    comes back unchanged (the same string)."""
    return _redact_string(text, 0)


def redacted_prefix(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text`` as a store keeps them: redacted
    (:func:`redact_document`) before the cut, so a cut never keeps the head of a secret that
    the whole text shows as one (a token cut short may no longer look like one)."""
    return redact_document(text)[:limit]


def _redact_string(text: str, depth: int) -> str:
    if not text:
        return text
    if not (_hinted(text) or "PRIVATE KEY" in text or "\\/" in text):  # JSON may write / as \/
        return text
    if text.lstrip()[:1] in ("{", "["):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return redact(text)
        if isinstance(value, dict | list):
            clean = redact_value(value, depth=depth + 1)
            return text if clean == value else json.dumps(clean, ensure_ascii=False)
    return redact(text)


_NAME_ONLY = re.compile(_SECRET_NAME, re.IGNORECASE)


def _is_secret_name(name: str) -> bool:
    """A key whose value is a secret: a name that says so (:data:`_SECRET_NAME`), or Docker's
    ``config.json`` ``auth`` (base64 of user:password; docs.docker.com, "docker login"), which
    :data:`_DOCKER_AUTH` finds in text."""
    return bool(_NAME_ONLY.fullmatch(name)) or name.lower() == "auth"
