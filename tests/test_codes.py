"""Code tables (unstuck.recognise.codes, unstuck/data/codes.yaml).

Expected verdicts come from each code's reference (quoted beside it) or from the program's own
catalogue on this machine (the C library's errno values, PostgreSQL's errcodes.txt, Node.js's
internal error list, OpenSSL's reason names as Python's ssl module carries them). Token shapes
are read from the output of real programs run here (python, node, npm, curl, psql, a PostgreSQL
server, an OpenSSL handshake), always against 127.0.0.1 or a local socket; where no such program
is installed (gRPC, MySQL, Redis, cloud CLIs) the text is written in the program's documented
format, named beside it.
"""

from __future__ import annotations

import contextlib
import errno
import http.server
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from unstuck.core.situations import Kind
from unstuck.recognise.codes import (
    HTTP_TABLE,
    MAX_HITS,
    CodeRow,
    CodeTables,
    CodeVerdict,
    load_code_tables,
    merge_code_tables,
)

TABLES = load_code_tables()
NOBODY_UID = 65534


def row(table: str, code: str) -> CodeRow:
    for spec in TABLES.tables:
        if spec.name == table:
            for candidate in spec.rows:
                if candidate.code == code:
                    return candidate
    raise AssertionError(f"no row {code!r} in table {table!r}")


def found(text: str) -> dict[tuple[str, str], CodeVerdict]:
    return {(v.table, v.code): v for v in TABLES.in_text(text)}


def run(argv: list[str], *, as_nobody: bool = False, env: dict[str, str] | None = None) -> str:
    """Run a real program; return what it printed (stdout then stderr)."""
    if as_nobody and os.geteuid() == 0:
        argv = ["setpriv", f"--reuid={NOBODY_UID}", f"--regid={NOBODY_UID}", "--clear-groups", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)
    return done.stdout + done.stderr


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
needs_npm = pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
needs_nobody = pytest.mark.skipif(
    os.geteuid() == 0 and shutil.which("setpriv") is None, reason="cannot drop to an unprivileged user"
)


# --- a local HTTP server: /s/<status> answers that status; /otp/... answers npm's OTP challenge --


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        parts = self.path.strip("/").split("/")
        if parts[0] == "otp":
            status, extra = 401, {"www-authenticate": "OTP"}
        else:
            status, extra = int(parts[1]), {}
        body = b'{"error":"refused by the test server"}'
        self.send_response(status)
        for name, value in extra.items():
            self.send_header(name, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# --- loading and validation ------------------------------------------------------------------


def test_the_bundled_tables_load_in_priority_order_with_http_last() -> None:
    assert TABLES.names[0] == "aadsts"
    assert TABLES.names[-1] == HTTP_TABLE
    assert len(set(TABLES.names)) == len(TABLES.names)
    assert load_code_tables() is TABLES  # parsed once, then cached


def test_every_table_and_every_row_names_a_source_that_is_not_a_case() -> None:
    case_id = re.compile(r"\b(?:c\d{3}|s2-\d{3})\b|tool_outputs")
    for spec in TABLES.tables:
        assert spec.source.strip(), spec.name
        assert not case_id.search(spec.source), spec.name
        for entry in spec.rows:
            assert entry.source.strip(), (spec.name, entry.code)
            assert not case_id.search(entry.source), (spec.name, entry.code)


def test_every_pattern_compiles_under_re2_with_exactly_one_capture_group() -> None:
    for spec in TABLES.tables:
        for pattern in spec.patterns:
            compiled = re2.compile(pattern.replace("{codes}", "CODE"))
            assert compiled.groups == 1, (spec.name, pattern)
        for pattern in spec.status_patterns:
            compiled = re2.compile(pattern.replace("{status}", "[0-9]{3}"))
            assert compiled.groups == 1, (spec.name, pattern)
        for optional in (spec.value, spec.context, *spec.status_veto):
            if optional is not None:
                re2.compile(optional)


def test_every_table_says_where_codes_come_from_fields_or_text() -> None:
    for spec in TABLES.tables:
        assert spec.fields or spec.patterns or spec.status_patterns, spec.name


GOOD_TABLE = """
tables:
  - name: mine
    source: 'my tool, docs/errors.md'
    fields: [code]
    patterns: ['\\bmytool: ({codes})\\b']
    rows:
      BADKEY: {kind: auth}
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            GOOD_TABLE.replace("kind: auth", "kind: sleepy"),
            r"table 'mine', row 'BADKEY': unknown kind 'sleepy'",
            id="unknown-kind",
        ),
        pytest.param(
            GOOD_TABLE.replace("    source: 'my tool, docs/errors.md'\n", ""),
            r"table 'mine': source is missing",
            id="no-source",
        ),
        pytest.param(
            GOOD_TABLE.replace("({codes})", "(?=x)({codes})"), r"table 'mine', pattern 1: RE2 refuses", id="lookahead"
        ),
        pytest.param(
            GOOD_TABLE.replace("({codes})", "(x)\\1({codes})"),
            r"table 'mine', pattern 1: RE2 refuses",
            id="backreference",
        ),
        pytest.param(
            GOOD_TABLE.replace("({codes})", "(?:{codes})"),
            r"pattern 1: .* exactly 1 capture group",
            id="no-capture-group",
        ),
        pytest.param(
            GOOD_TABLE.replace("{kind: auth}", "{kind: auth, retry: true}"),
            r"row 'BADKEY': unknown row field 'retry'",
            id="unknown-row-field",
        ),
        pytest.param(
            GOOD_TABLE.replace("    fields: [code]", "    leaves: [code]"),
            r"table 'mine': unknown table field 'leaves'",
            id="unknown-table-field",
        ),
        pytest.param(
            GOOD_TABLE + "      BADKEY: {kind: permission}\n", r"row 'BADKEY': duplicate code", id="duplicate-code"
        ),
        pytest.param(
            GOOD_TABLE + "      OTHER: {kind: auth, aliases: [BADKEY]}\n",
            r"row 'OTHER': 'BADKEY' is already",
            id="alias-claims-a-code",
        ),
        pytest.param(
            GOOD_TABLE.replace("{kind: auth}", "{kind: auth, interactive: yes please}"),
            r"row 'BADKEY': interactive must be true or false",
            id="flag-not-boolean",
        ),
        pytest.param(
            GOOD_TABLE.replace("{kind: auth}", "{kind: auth, phrases: [Bad Key]}"),
            r"row 'BADKEY': phrases belong to the 'http' table",
            id="phrases-outside-http",
        ),
        pytest.param(
            GOOD_TABLE.replace("    fields: [code]", "    fields: [code]\n    range: [5, 1]"),
            r"table 'mine': range must be",
            id="range-reversed",
        ),
        pytest.param(
            GOOD_TABLE.replace("      BADKEY: {kind: auth}", "      BADKEY: auth"),
            r"row 'BADKEY': a row must be a mapping",
            id="row-not-a-mapping",
        ),
        pytest.param("tables: [\n  {name: mine,", r"not valid YAML", id="not-yaml"),
    ],
)
def test_a_malformed_table_is_a_value_error_naming_the_file_the_table_and_the_row(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^my-codes\.yaml: .*" + message):
        load_code_tables(text, where="my-codes.yaml")


def test_a_well_formed_user_table_loads_and_reads_its_shape() -> None:
    mine = load_code_tables(GOOD_TABLE, where="my-codes.yaml")
    assert mine.names == ("mine",)
    assert [(v.table, v.code, v.kind) for v in mine.in_text("mytool: BADKEY")] == [("mine", "BADKEY", Kind.AUTH)]
    assert mine.for_field("code", "BADKEY") == CodeVerdict(
        Kind.AUTH, False, False, False, "mine", "BADKEY", "my tool, docs/errors.md"
    )


def test_row_codes_are_read_as_written_so_leading_zeros_and_signs_survive() -> None:
    tables = load_code_tables(
        "tables:\n  - name: t\n    source: s\n    fields: [code]\n    rows:\n"
        "      01000: {kind: conflict}\n      -32602: {kind: invalid_args}\n      yes: {kind: empty}\n",
        where="t.yaml",
    )
    assert [entry.code for entry in tables.tables[0].rows] == ["01000", "-32602", "yes"]
    assert tables.for_field("code", "01000") is not None
    assert tables.for_field("code", "yes") is not None


def test_code_tables_are_immutable() -> None:
    with pytest.raises(AttributeError):
        TABLES._tables = ()


# --- prefix rows, aliases, numbers ----------------------------------------------------------------


PREFIXES = """
tables:
  - name: classes
    source: 'a catalogue of classes'
    fields: [state]
    rows:
      '5*': {kind: execution_error}
      '53*': {kind: unavailable, retryable: true}
      '53100': {kind: quota}
"""


def test_an_exact_row_beats_a_prefix_row_and_a_longer_prefix_beats_a_shorter_one() -> None:
    tables = load_code_tables(PREFIXES, where="classes.yaml")
    exact = tables.for_field("state", "53100")
    longer = tables.for_field("state", "53999")
    shorter = tables.for_field("state", "57000")
    assert exact is not None and (exact.kind, exact.code) == (Kind.QUOTA, "53100")
    assert longer is not None and (longer.kind, longer.retryable, longer.code) == (Kind.UNAVAILABLE, True, "53999")
    assert shorter is not None and (shorter.kind, shorter.code) == (Kind.EXECUTION_ERROR, "57000")
    assert tables.for_field("state", "5") is None  # a prefix needs at least one more character


def test_a_sqlstate_class_row_reads_a_code_of_its_class_that_has_no_row() -> None:
    # Appendix A: "Class 28 - Invalid Authorization Specification"; 28999 is not in the catalogue
    verdict = TABLES.for_field("sqlstate", "28999")
    assert verdict is not None and (verdict.kind, verdict.code, verdict.table) == (Kind.AUTH, "28999", "sqlstate")


def test_an_alias_is_reported_as_the_code_it_spells() -> None:
    # grpc-go spells UNAVAILABLE "Unavailable" (codes.Unavailable.String())
    (verdict,) = TABLES.in_text("rpc error: code = Unavailable desc = connection error")
    assert (verdict.table, verdict.code, verdict.kind, verdict.retryable) == (
        "grpc",
        "UNAVAILABLE",
        Kind.UNAVAILABLE,
        True,
    )


# --- what each table's codes mean: quoted from its reference --------------------------------------

REFERENCE = [
    # Entra: "AADSTS50076 UserStrongAuthClientAuthNRequired - ... the user must use multifactor authentication"
    ("aadsts", "AADSTS50076", Kind.AUTH, False, True),
    # Entra: "AADSTS700082 ExpiredOrRevokedGrantInactiveToken - The refresh token has expired due to inactivity."
    ("aadsts", "AADSTS700082", Kind.AUTH, False, True),
    # Entra: "AADSTS53003 BlockedByConditionalAccess - Access has been blocked by Conditional Access policies."
    ("aadsts", "AADSTS53003", Kind.PERMISSION, False, False),
    # Entra: "AADSTS70016 AuthorizationPending - ... The device will retry polling the request."
    ("aadsts", "AADSTS70016", Kind.AUTH, True, True),
    # GitHub: "already_exists: Another resource has the same value as this field."
    ("github", "already_exists", Kind.CONFLICT, False, False),
    # GitHub GraphQL: RATE_LIMITED "API rate limit exceeded"
    ("github", "RATE_LIMITED", Kind.QUOTA, True, False),
    # GitHub push protection: "GH013: Repository rule violations found" (a push refused by rules)
    ("github", "GH013", Kind.PERMISSION, False, False),
    # Apollo: "UNAUTHENTICATED: The server failed to authenticate with a required data source"
    ("graphql", "UNAUTHENTICATED", Kind.AUTH, False, False),
    # AWS: "AccessDeniedException: You do not have sufficient access to perform this action."
    ("aws", "AccessDeniedException", Kind.PERMISSION, False, False),
    # AWS: "ExpiredTokenException: The security token included in the request is expired"
    ("aws", "ExpiredTokenException", Kind.AUTH, False, True),
    # AWS: "ThrottlingException: The request was denied due to request throttling."
    ("aws", "ThrottlingException", Kind.QUOTA, True, False),
    # S3: "NoSuchBucket: The specified bucket does not exist."
    ("aws", "NoSuchBucket", Kind.NOT_FOUND, False, False),
    # ARM: "AuthorizationFailed: Your account or service principal doesn't have sufficient access"
    ("azure", "AuthorizationFailed", Kind.PERMISSION, False, False),
    # Azure Storage: "ServerBusy ... Service Unavailable (503)"
    ("azure", "ServerBusy", Kind.UNAVAILABLE, True, False),
    # error_reason.proto: "SERVICE_DISABLED: The request is calling a disabled service for a consumer."
    ("google", "SERVICE_DISABLED", Kind.PERMISSION, False, False),
    # error_reason.proto: "ACCESS_TOKEN_SCOPE_INSUFFICIENT: ... the request does not have the required scopes"
    ("google", "ACCESS_TOKEN_SCOPE_INSUFFICIENT", Kind.PERMISSION, False, False),
    # error_reason.proto: "RATE_LIMIT_EXCEEDED: ... exceeds the rate limit"
    ("google", "RATE_LIMIT_EXCEEDED", Kind.QUOTA, True, False),
    # Drive API: "dailyLimitExceeded: The Courtesy API limit for your project has been reached."
    ("google", "dailyLimitExceeded", Kind.QUOTA, False, False),
    # Cloud Storage JSON API: "accessNotConfigured: ... the API is not enabled"
    ("google", "accessNotConfigured", Kind.PERMISSION, False, False),
    # Slack: "missing_scope: The token used is not granted the specific scope permissions required"
    ("slack", "missing_scope", Kind.PERMISSION, False, False),
    # Slack: "invalid_auth: Some aspect of authentication cannot be validated."
    ("slack", "invalid_auth", Kind.AUTH, False, False),
    # Slack: "ratelimited: The request has been ratelimited. Refer to the Retry-After header"
    ("slack", "ratelimited", Kind.QUOTA, True, False),
    # RFC 6749 5.2: "invalid_grant: The provided authorization grant ... or refresh token is invalid, expired, revoked"
    ("oauth", "invalid_grant", Kind.AUTH, False, True),
    # RFC 6750 3.1: "insufficient_scope: The request requires higher privileges than provided by the access token."
    ("oauth", "insufficient_scope", Kind.PERMISSION, False, False),
    # RFC 8628 3.5: "authorization_pending: The authorization request is still pending as the end user hasn't yet completed"
    ("oauth", "authorization_pending", Kind.AUTH, True, True),
    # RFC 8628 3.5: "expired_token: The device_code has expired, and the device authorization session has concluded."
    ("oauth", "expired_token", Kind.AUTH, False, True),
    # OpenAI: "401 - Incorrect API key provided" (code invalid_api_key)
    ("openai", "invalid_api_key", Kind.AUTH, False, False),
    # OpenAI: "429 - You exceeded your current quota, please check your plan and billing details" (spent: not retryable)
    ("openai", "insufficient_quota", Kind.QUOTA, False, False),
    # OpenAI: "429 - Rate limit reached for requests"
    ("openai", "rate_limit_exceeded", Kind.QUOTA, True, False),
    # OpenAI: model_not_found "The model ... does not exist or you do not have access to it."
    ("openai", "model_not_found", Kind.NOT_FOUND, False, False),
    # Anthropic: "529 - overloaded_error: The API is temporarily overloaded."
    ("anthropic", "overloaded_error", Kind.UNAVAILABLE, True, False),
    # Anthropic: "402 - billing_error"
    ("anthropic", "billing_error", Kind.QUOTA, False, False),
    # Anthropic: "403 - permission_error: Your API key does not have permission to use the specified resource."
    ("anthropic", "permission_error", Kind.PERMISSION, False, False),
    # Stripe: "idempotency_error: ... an Idempotency-Key is re-used on a request that does not match the first request"
    ("stripe", "idempotency_error", Kind.CONFLICT, False, False),
    # Stripe: "lock_timeout: ... another API request or Stripe process is currently accessing it ... retry the request"
    ("stripe", "lock_timeout", Kind.CONFLICT, True, False),
    # Stripe: "resource_missing: The ID provided is not valid."
    ("stripe", "resource_missing", Kind.NOT_FOUND, False, False),
    # Twilio: "20003 Permission Denied / Authenticate"
    ("twilio", "20003", Kind.AUTH, False, False),
    # Twilio: "20429 Too Many Requests"
    ("twilio", "20429", Kind.QUOTA, True, False),
    # JSON-RPC 2.0 5.1: "-32602 Invalid params: Invalid method parameter(s)."
    ("jsonrpc", "-32602", Kind.INVALID_ARGS, False, False),
    # JSON-RPC 2.0 5.1: "-32601 Method not found: The method does not exist / is not available."
    ("jsonrpc", "-32601", Kind.NOT_FOUND, False, False),
    # MCP TypeScript SDK: "RequestTimeout = -32001"
    ("jsonrpc", "-32001", Kind.TIMEOUT, True, False),
    # MCP resources: "Resource not found: -32002"
    ("jsonrpc", "-32002", Kind.NOT_FOUND, False, False),
    # apimachinery: "StatusReasonTooManyRequests means the server experienced too many requests ... the client must wait"
    ("kubernetes", "TooManyRequests", Kind.QUOTA, True, False),
    # apimachinery: "StatusReasonAlreadyExists means the resource you are creating already exists."
    ("kubernetes", "AlreadyExists", Kind.CONFLICT, False, False),
    # statuscodes.md: "UNAVAILABLE 14: The service is currently unavailable ... corrected by retrying with a backoff."
    ("grpc", "UNAVAILABLE", Kind.UNAVAILABLE, True, False),
    # statuscodes.md: "RESOURCE_EXHAUSTED 8: Some resource has been exhausted, perhaps a per-user quota"
    ("grpc", "RESOURCE_EXHAUSTED", Kind.QUOTA, True, False),
    # statuscodes.md: "UNAUTHENTICATED 16: The request does not have valid authentication credentials"
    ("grpc", "UNAUTHENTICATED", Kind.AUTH, False, False),
    # statuscodes.md: "DEADLINE_EXCEEDED 4: The deadline expired before the operation could complete."
    ("grpc_number", "4", Kind.TIMEOUT, True, False),
    # Appendix A: "53300 too_many_connections" (a server that is full: unavailable, retryable)
    ("sqlstate", "53300", Kind.UNAVAILABLE, True, False),
    # Appendix A: "28P01 invalid_password"
    ("sqlstate", "28P01", Kind.AUTH, False, False),
    # Appendix A: "42501 insufficient_privilege"
    ("sqlstate", "42501", Kind.PERMISSION, False, False),
    # Appendix A: "40P01 deadlock_detected" (Class 40 - Transaction Rollback)
    ("sqlstate", "40P01", Kind.CONFLICT, True, False),
    # MySQL: "Error number: 1045; Symbol: ER_ACCESS_DENIED_ERROR; Message: Access denied for user"
    ("mysql", "1045", Kind.AUTH, False, False),
    # MySQL: "Error number: 1040; Symbol: ER_CON_COUNT_ERROR; Message: Too many connections"
    ("mysql", "1040", Kind.UNAVAILABLE, True, False),
    # MySQL: "Error number: 1213; Symbol: ER_LOCK_DEADLOCK; Message: Deadlock found when trying to get lock; try restarting transaction"
    ("mysql", "1213", Kind.CONFLICT, True, False),
    # server.c: "-LOADING Redis is loading the dataset in memory" (still loading: unavailable, retryable)
    ("redis", "LOADING", Kind.UNAVAILABLE, True, False),
    # server.c: "-NOAUTH Authentication required."
    ("redis", "NOAUTH", Kind.AUTH, False, False),
    # acl.c: "-NOPERM ... has no permissions to run the ... command"
    ("redis", "NOPERM", Kind.PERMISSION, False, False),
    # server.c: "-OOM command not allowed when used memory > 'maxmemory'."
    ("redis", "OOM", Kind.QUOTA, False, False),
    # npm-registry-fetch: HttpErrorAuthOTP, code EOTP ("This operation requires a one-time password")
    ("npm", "EOTP", Kind.AUTH, False, True),
    # arborist: "ERESOLVE unable to resolve dependency tree" (an unsatisfiable resolution: conflict)
    ("npm", "ERESOLVE", Kind.CONFLICT, False, False),
    # pnpm: "ERR_PNPM_OUTDATED_LOCKFILE: Cannot install with frozen-lockfile because pnpm-lock.yaml is not up to date"
    ("npm", "ERR_PNPM_OUTDATED_LOCKFILE", Kind.CONFLICT, False, False),
    # OpenSSL: SSL_R_CERTIFICATE_VERIFY_FAILED "certificate verify failed"
    ("tls", "CERTIFICATE_VERIFY_FAILED", Kind.NETWORK, False, False),
    # x509_vfy.h: X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT "self-signed certificate"
    ("tls", "DEPTH_ZERO_SELF_SIGNED_CERT", Kind.NETWORK, False, False),
    # net_error_list.h: NET_ERROR(CONNECTION_REFUSED, -102) "A connection attempt was refused." (nothing listens)
    ("chromium_net", "CONNECTION_REFUSED", Kind.UNAVAILABLE, True, False),
    # net_error_list.h: NET_ERROR(NAME_NOT_RESOLVED, -105) "The host name could not be resolved."
    ("chromium_net", "NAME_NOT_RESOLVED", Kind.NETWORK, True, False),
    # Node.js: "ERR_MODULE_NOT_FOUND: A module file could not be resolved by the ECMAScript modules loader"
    ("node", "ERR_MODULE_NOT_FOUND", Kind.NOT_INSTALLED, False, False),
    # Node.js: "ERR_CHILD_PROCESS_STDIO_MAXBUFFER: ... stdout or stderr exceeded the maxBuffer"
    ("node", "ERR_CHILD_PROCESS_STDIO_MAXBUFFER", Kind.TRUNCATED, False, False),
    # undici: ConnectTimeoutError UND_ERR_CONNECT_TIMEOUT (a connect-time timeout: network)
    ("node", "UND_ERR_CONNECT_TIMEOUT", Kind.NETWORK, True, False),
    # errno(3): "ENOSPC No space left on device" (a spent resource: quota, not retryable)
    ("errno", "ENOSPC", Kind.QUOTA, False, False),
    # errno(3): "EACCES Permission denied"
    ("errno", "EACCES", Kind.PERMISSION, False, False),
    # errno(3): "ECONNREFUSED Connection refused"
    ("errno", "ECONNREFUSED", Kind.UNAVAILABLE, True, False),  # nothing listens: the server is down
    # getaddrinfo(3): "EAI_AGAIN The name server returned a temporary failure indication. Try again later."
    ("errno", "EAI_AGAIN", Kind.NETWORK, True, False),
    # RFC 9110 15.5.4: "403 Forbidden: the server understood the request but refuses to fulfill it"
    ("http", "403", Kind.PERMISSION, False, False),
    # RFC 6585 4: "429 Too Many Requests: the user has sent too many requests in a given amount of time"
    ("http", "429", Kind.QUOTA, True, False),
    # RFC 6585 6: "511 Network Authentication Required: the client needs to authenticate to gain network access"
    ("http", "511", Kind.AUTH, False, True),
    # Anthropic: "529 - overloaded_error"
    ("http", "529", Kind.UNAVAILABLE, True, False),
]


@pytest.mark.parametrize(("table", "code", "kind", "retryable", "interactive"), REFERENCE, ids=lambda v: str(v))
def test_codes_mean_what_their_reference_says(
    table: str, code: str, kind: Kind, retryable: bool, interactive: bool
) -> None:
    entry = row(table, code)
    assert (entry.kind, entry.retryable, entry.interactive) == (kind, retryable, interactive)


def test_every_table_has_a_reference_check_above() -> None:
    assert {table for table, *_ in REFERENCE} == set(TABLES.names)


@pytest.mark.parametrize(
    ("table", "code"),
    [
        ("openai", "invalid_request_error"),  # the type of every 400-class OpenAI error
        (
            "anthropic",
            "invalid_request_error",
        ),  # "400 - ... We may also use this error type for other 4XX status codes"
        ("stripe", "invalid_request_error"),
        ("grpc", "UNKNOWN"),  # statuscodes.md: "Unknown error."
        ("http", "400"),
        ("http", "500"),
    ],
)
def test_category_level_codes_are_weak(table: str, code: str) -> None:
    assert row(table, code).weak


def test_sqlstate_53300_is_unavailable_and_retryable() -> None:
    verdict = TABLES.for_field("sqlstate", "53300")
    assert verdict is not None
    assert (verdict.kind, verdict.retryable, verdict.interactive, verdict.weak) == (
        Kind.UNAVAILABLE,
        True,
        False,
        False,
    )


def test_a_spent_disk_is_quota_and_not_retryable() -> None:
    verdict = TABLES.for_field("code", "ENOSPC")
    assert verdict is not None and (verdict.table, verdict.kind, verdict.retryable) == ("errno", Kind.QUOTA, False)


# --- the tables agree with the programs' own catalogues on this machine ---------------------------


def _header_errno() -> dict[str, int]:
    numbers: dict[str, int] = {}
    for name in ("errno-base.h", "errno.h"):
        header = Path("/usr/include/asm-generic") / name
        if not header.exists():
            pytest.skip("the Linux uapi headers are not installed")
        for match in re.finditer(r"^#define\s+(E[A-Z0-9]+)\s+(\d+)\b", header.read_text(), re.M):
            numbers[match.group(1)] = int(match.group(2))
    return numbers


def test_errno_numbers_agree_with_the_linux_headers_and_the_c_library() -> None:
    headers = _header_errno()
    spec = next(spec for spec in TABLES.tables if spec.name == "errno")
    checked = 0
    for entry in spec.rows:
        if entry.number is None or entry.number < 0:
            continue
        assert headers[entry.code] == entry.number, entry.code
        assert getattr(errno, entry.code) == entry.number, entry.code
        checked += 1
    assert checked > 60


def test_getaddrinfo_numbers_agree_with_the_c_library() -> None:
    spec = next(spec for spec in TABLES.tables if spec.name == "errno")
    gai = [entry for entry in spec.rows if entry.code.startswith("EAI_")]
    assert gai
    for entry in gai:
        assert getattr(socket, entry.code) == entry.number, entry.code


def _postgres_catalogue() -> tuple[dict[str, str], set[str]]:
    sharedir = (
        subprocess.run(["pg_config", "--sharedir"], capture_output=True, text=True, check=False).stdout.strip()
        if shutil.which("pg_config")
        else ""
    )
    path = Path(sharedir) / "errcodes.txt"
    if not path.exists():
        pytest.skip("PostgreSQL's errcodes.txt is not installed")
    conditions: dict[str, str] = {}
    classes: set[str] = set()
    for line in path.read_text().splitlines():
        section = re.match(r"Section: Class (\w\w) - ", line)
        if section:
            classes.add(section.group(1))
        entry = re.match(r"^([0-9A-Z]{5})\s+[EWS]\s+ERRCODE_\w+\s+(\w+)", line)
        if entry:
            conditions[entry.group(1)] = entry.group(2)
    return conditions, classes


def test_sqlstate_rows_are_postgresql_catalogue_entries_and_aliases_are_their_condition_names() -> None:
    conditions, classes = _postgres_catalogue()
    spec = next(spec for spec in TABLES.tables if spec.name == "sqlstate")
    for entry in spec.rows:
        if entry.source != spec.source:
            continue  # a row from another catalogue (MySQL, ODBC) names its own source
        if entry.is_prefix:
            assert entry.code[:-1] in classes, entry.code
            continue
        assert entry.code in conditions, entry.code
        for alias in entry.aliases:  # psycopg's exception names: the condition name in CamelCase
            assert alias == "".join(part.capitalize() for part in conditions[entry.code].split("_")), entry.code


@needs_node
def test_node_error_codes_are_in_nodes_own_error_list() -> None:
    listed = run(
        ["node", "--expose-internals", "-e", "console.log(Object.keys(require('internal/errors').codes).join('\\n'))"]
    ).split()
    spec = next(spec for spec in TABLES.tables if spec.name == "node")
    own = [entry.code for entry in spec.rows if entry.source == spec.source]
    assert own
    assert set(own) <= set(listed)


def test_openssl_reasons_are_in_the_ssl_modules_catalogue() -> None:
    import _ssl

    reasons = {name for name in getattr(_ssl, "err_names_to_codes", {})}
    if not reasons:
        pytest.skip("this Python's ssl module carries no reason catalogue")
    spec = next(spec for spec in TABLES.tables if spec.name == "tls")
    python_printed = [
        entry.code
        for entry in spec.rows
        if "_ALERT_" in entry.code
        or entry.code
        in {
            "CERTIFICATE_VERIFY_FAILED",
            "WRONG_VERSION_NUMBER",
            "UNSAFE_LEGACY_RENEGOTIATION_DISABLED",
            "UNEXPECTED_EOF_WHILE_READING",
        }
    ]
    assert len(python_printed) >= 5
    assert set(python_printed) <= reasons


def test_grpc_numbers_mean_what_the_names_mean() -> None:
    # statuscodes.md numbers each code: CANCELLED 1 ... UNAUTHENTICATED 16
    numbering = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ]
    for number, name in enumerate(numbering[1:], start=1):
        by_name, by_number = row("grpc", name), row("grpc_number", str(number))
        assert (by_name.kind, by_name.retryable, by_name.weak) == (
            by_number.kind,
            by_number.retryable,
            by_number.weak,
        ), name


# --- envelope fields ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("leaf", "value", "text", "table", "code", "kind"),
    [
        ("code", "invalid_api_key", "", "openai", "invalid_api_key", Kind.AUTH),
        ("type", "overloaded_error", "", "anthropic", "overloaded_error", Kind.UNAVAILABLE),
        ("__type", "com.amazon.coral.service#ExpiredTokenException", "", "aws", "ExpiredTokenException", Kind.AUTH),
        # x-amzn-ErrorType header value: "ExpiredTokenException:http://internal.amazon.com/coral/com.amazon.coral.service/"
        (
            "__type",
            "ExpiredTokenException:http://internal.amazon.com/coral/com.amazon.coral.service/",
            "",
            "aws",
            "ExpiredTokenException",
            Kind.AUTH,
        ),
        ("Code", "AccessDenied", "", "aws", "AccessDenied", Kind.PERMISSION),
        ("reason", "Forbidden", "", "kubernetes", "Forbidden", Kind.PERMISSION),
        ("reason", "SERVICE_DISABLED", "", "google", "SERVICE_DISABLED", Kind.PERMISSION),
        ("error", "missing_scope", "", "slack", "missing_scope", Kind.PERMISSION),
        ("error", "invalid_grant", "", "oauth", "invalid_grant", Kind.AUTH),
        ("code", -32602, "", "jsonrpc", "-32602", Kind.INVALID_ARGS),
        ("code", "-32001", "", "jsonrpc", "-32001", Kind.TIMEOUT),
        ("code", 403, "", "http", "403", Kind.PERMISSION),
        ("status", "503", "", "http", "503", Kind.UNAVAILABLE),
        ("status", "PERMISSION_DENIED", "", "grpc", "PERMISSION_DENIED", Kind.PERMISSION),
        ("sqlstate", "53300", "", "sqlstate", "53300", Kind.UNAVAILABLE),
        ("code", "53300", "", "sqlstate", "53300", Kind.UNAVAILABLE),
        ("code", "E401", "", "npm", "E401", Kind.AUTH),
        ("code", "EACCES", "", "errno", "EACCES", Kind.PERMISSION),
        ("errno", 28, "", "errno", "ENOSPC", Kind.QUOTA),
        ("error_codes", 50076, "", "aadsts", "AADSTS50076", Kind.AUTH),
        ("code", "missing_field", "", "github", "missing_field", Kind.INVALID_ARGS),
        ("type", "INSUFFICIENT_SCOPES", "", "github", "INSUFFICIENT_SCOPES", Kind.PERMISSION),
        ("code", "AuthorizationFailed", "", "azure", "AuthorizationFailed", Kind.PERMISSION),
        ("code", "lock_timeout", "", "stripe", "lock_timeout", Kind.CONFLICT),
        (
            "code",
            20003,
            '{"code": 20003, "more_info": "https://www.twilio.com/docs/errors/20003"}',
            "twilio",
            "20003",
            Kind.AUTH,
        ),
        (
            "code",
            14,
            '{"code": 14, "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo"}]}',
            "grpc_number",
            "14",
            Kind.UNAVAILABLE,
        ),
        ("errno", 1045, "{code: 'ER_ACCESS_DENIED_ERROR', errno: 1045, sqlState: '28000'}", "mysql", "1045", Kind.AUTH),
        ("code", "ER_ACCESS_DENIED_ERROR", "{code: 'ER_ACCESS_DENIED_ERROR', errno: 1045}", "mysql", "1045", Kind.AUTH),
    ],
)
def test_an_envelope_field_is_read_by_the_first_table_that_knows_it(
    leaf: str, value: str | int, text: str, table: str, code: str, kind: Kind
) -> None:
    verdict = TABLES.for_field(leaf, value, text=text)
    assert verdict is not None
    assert (verdict.table, verdict.code, verdict.kind) == (table, code, kind)


def test_a_twilio_number_needs_the_text_to_name_twilio() -> None:
    assert TABLES.for_field("code", 20003, text='{"code": 20003, "message": "Authenticate"}') is None


def test_a_grpc_number_needs_a_grpc_context() -> None:
    assert TABLES.for_field("code", 14, text='{"code": 14, "message": "try later"}') is None


def test_a_field_value_of_the_wrong_shape_is_not_read() -> None:
    assert TABLES.for_field("code", True) is None  # a bool is never a code
    assert TABLES.for_field("code", 3.5) is None  # type: ignore[arg-type]
    assert TABLES.for_field("code", "") is None
    assert TABLES.for_field("sqlstate", "5330") is None  # SQLSTATE is five characters
    assert TABLES.for_field("code", 53300) is None  # an integer is read only by a table with a range
    assert TABLES.for_field("status", 700) is None  # outside 100..599
    assert TABLES.for_field("unheard_of_leaf", "EACCES") is None


# --- tokens in text, from real programs -----------------------------------------------------------


@needs_nobody
def test_python_permission_error_is_eacces() -> None:
    text = run([sys.executable, "-c", "open('/root/unstuck-codes-test', 'w')"], as_nobody=True)
    assert "[Errno 13]" in text
    assert found(text)[("errno", "EACCES")].kind is Kind.PERMISSION


def test_python_write_to_a_full_device_is_enospc() -> None:
    text = run([sys.executable, "-c", "f = open('/dev/full', 'w'); f.write('x'); f.close()"])
    verdict = found(text)[("errno", "ENOSPC")]
    assert (verdict.kind, verdict.retryable) == (Kind.QUOTA, False)


def test_python_refused_loopback_connection_is_econnrefused() -> None:
    port = free_port()
    text = run([sys.executable, "-c", f"import socket; socket.create_connection(('127.0.0.1', {port}))"])
    verdict = found(text)[("errno", "ECONNREFUSED")]
    assert (verdict.kind, verdict.retryable) == (Kind.UNAVAILABLE, True)


@needs_node
@needs_nobody
def test_node_fs_permission_error_is_eacces() -> None:
    text = run(["node", "-e", "require('fs').writeFileSync('/root/unstuck-codes-test', 'x')"], as_nobody=True)
    assert "EACCES: permission denied" in text
    assert found(text)[("errno", "EACCES")].kind is Kind.PERMISSION


@needs_node
def test_node_write_to_a_full_device_is_enospc() -> None:
    text = run(["node", "-e", "require('fs').writeFileSync('/dev/full', 'x')"])
    assert found(text)[("errno", "ENOSPC")].kind is Kind.QUOTA


@needs_node
def test_node_refused_loopback_connection_is_econnrefused() -> None:
    port = free_port()
    text = run(["node", "-e", f"require('net').connect({port}, '127.0.0.1')"])
    assert f"connect ECONNREFUSED 127.0.0.1:{port}" in text
    assert found(text)[("errno", "ECONNREFUSED")].retryable


@needs_node
def test_node_spawn_of_a_missing_program_is_enoent() -> None:
    text = run(
        ["node", "-e", "require('child_process').spawn('no-such-program-unstuck').on('error', e => { throw e })"]
    )
    assert found(text)[("errno", "ENOENT")].kind is Kind.NOT_FOUND


@needs_node
def test_node_missing_es_module_is_err_module_not_found() -> None:
    text = run(["node", "--input-type=module", "-e", "import 'no-such-package-unstuck'"])
    assert found(text)[("node", "ERR_MODULE_NOT_FOUND")].kind is Kind.NOT_INSTALLED


@needs_node
def test_node_missing_commonjs_module_is_module_not_found() -> None:
    text = run(["node", "-e", "require('no-such-package-unstuck')"])
    assert found(text)[("node", "MODULE_NOT_FOUND")].kind is Kind.NOT_INSTALLED


@needs_node
def test_node_wrong_argument_type_is_invalid_args() -> None:
    text = run(["node", "-e", "require('fs').readFileSync({})"])
    assert found(text)[("node", "ERR_INVALID_ARG_TYPE")].kind is Kind.INVALID_ARGS


def _npm(registry: str, home: Path) -> str:
    env = {**os.environ, "HOME": str(home), "npm_config_cache": str(home / "cache"), "NO_UPDATE_NOTIFIER": "1"}
    return run(
        ["npm", "view", "some-package", "--registry", registry, "--fetch-retries=0", "--no-audit", "--no-fund"], env=env
    )


@needs_npm
def test_npm_one_time_password_challenge_is_eotp_and_interactive(http_server: str, tmp_path: Path) -> None:
    text = _npm(f"{http_server}/otp/", tmp_path)
    verdict = found(text)[("npm", "EOTP")]
    assert (verdict.kind, verdict.interactive) == (Kind.AUTH, True)


@needs_npm
def test_npm_unauthorized_registry_is_e401(http_server: str, tmp_path: Path) -> None:
    text = _npm(f"{http_server}/s/401/", tmp_path)
    assert found(text)[("npm", "E401")].kind is Kind.AUTH
    assert TABLES.status_in_text(text) == 401  # "npm error 401 Unauthorized - GET ..."


@needs_npm
def test_npm_missing_package_is_e404(http_server: str, tmp_path: Path) -> None:
    text = _npm(f"{http_server}/s/404/", tmp_path)
    assert found(text)[("npm", "E404")].kind is Kind.NOT_FOUND
    assert TABLES.status_in_text(text) == 404


@pytest.fixture(scope="module")
def self_signed_tls_port() -> Iterator[int]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    workdir = Path(tempfile.mkdtemp())
    cert, key = workdir / "cert.pem", workdir / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        capture_output=True,
        check=True,
        timeout=60,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with contextlib.suppress(OSError), context.wrap_socket(conn, server_side=True):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
        shutil.rmtree(workdir, ignore_errors=True)


def test_python_tls_to_a_self_signed_server_is_certificate_verify_failed(self_signed_tls_port: int) -> None:
    text = run(
        [
            sys.executable,
            "-c",
            "import socket, ssl; ssl.create_default_context().wrap_socket("
            f"socket.create_connection(('127.0.0.1', {self_signed_tls_port})), server_hostname='localhost')",
        ]
    )
    assert found(text)[("tls", "CERTIFICATE_VERIFY_FAILED")].kind is Kind.NETWORK


@needs_node
def test_node_tls_to_a_self_signed_server_is_depth_zero_self_signed_cert(self_signed_tls_port: int) -> None:
    text = run(
        [
            "node",
            "-e",
            f"require('tls').connect({{host: '127.0.0.1', port: {self_signed_tls_port}, servername: 'localhost'}})"
            ".on('error', e => { console.error(e); process.exit(1) })",
        ]
    )
    assert found(text)[("tls", "DEPTH_ZERO_SELF_SIGNED_CERT")].kind is Kind.NETWORK


@pytest.fixture(scope="module")
def postgres() -> Iterator[tuple[str, str]]:
    """A real PostgreSQL server on a Unix socket only (listen_addresses is empty), run as nobody."""
    bindir = ""
    if shutil.which("pg_config"):
        bindir = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
    initdb, pg_ctl = Path(bindir) / "initdb", Path(bindir) / "pg_ctl"
    if not initdb.exists() or not pg_ctl.exists() or shutil.which("psql") is None:
        pytest.skip("PostgreSQL server binaries are not installed")
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("cannot drop to an unprivileged user for the server")
    base = Path(tempfile.mkdtemp(prefix="unstuck-pg-"))
    if os.geteuid() == 0:
        os.chown(base, NOBODY_UID, NOBODY_UID)
    data, port = base / "data", str(free_port())
    run([str(initdb), "-D", str(data), "-A", "trust", "-U", "postgres", "-N"], as_nobody=True)
    options = (
        f"-k {base} -p {port} -c listen_addresses= -c max_connections=1 -c superuser_reserved_connections=0 "
        "-c log_error_verbosity=verbose"
    )
    run([str(pg_ctl), "-D", str(data), "-o", options, "-l", str(base / "server.log"), "-w", "start"], as_nobody=True)
    try:
        yield str(base), port
    finally:
        run([str(pg_ctl), "-D", str(data), "-m", "immediate", "stop"], as_nobody=True)
        shutil.rmtree(base, ignore_errors=True)


def _psql(server: tuple[str, str], sql: str) -> str:
    socket_dir, port = server
    return run(
        [
            "psql",
            "-h",
            socket_dir,
            "-p",
            port,
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-X",
            "-v",
            "VERBOSITY=verbose",
            "-c",
            sql,
        ]
    )


def test_psql_missing_table_is_sqlstate_42p01_not_found(postgres: tuple[str, str]) -> None:
    text = _psql(postgres, "select * from no_such_table")
    assert found(text)[("sqlstate", "42P01")].kind is Kind.NOT_FOUND
    assert TABLES.status_in_text(text) is None  # "LINE 1: ..." and "parse_relation.c:1392" are not statuses


def test_psql_missing_privilege_is_sqlstate_42501_permission(postgres: tuple[str, str]) -> None:
    text = _psql(postgres, "create role unstuck_r; set role unstuck_r; create table t(x int)")
    assert found(text)[("sqlstate", "42501")].kind is Kind.PERMISSION


def test_a_full_postgresql_server_logs_sqlstate_53300(postgres: tuple[str, str]) -> None:
    socket_dir, port = postgres
    holder = subprocess.Popen(
        ["psql", "-h", socket_dir, "-p", port, "-U", "postgres", "-d", "postgres", "-X", "-c", "select pg_sleep(20)"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    log = Path(socket_dir) / "server.log"
    try:
        for _ in range(100):
            refused = _psql(postgres, "select 1")
            if "too many clients" in refused:
                break
            threading.Event().wait(0.1)
        text = log.read_text()
    finally:
        holder.terminate()
        holder.wait(timeout=10)
    verdict = found(text)[("sqlstate", "53300")]  # "... FATAL:  53300: sorry, too many clients already"
    assert (verdict.kind, verdict.retryable) == (Kind.UNAVAILABLE, True)
    assert TABLES.status_in_text(text) is None  # log lines start with a date and a pid


# --- tokens in text, in the documented formats of programs not installed here -----------------------

DOCUMENTED = [
    # aws-cli / botocore ClientError: "An error occurred (%s) when calling the %s operation: %s"
    (
        "An error occurred (ExpiredToken) when calling the GetCallerIdentity operation: The security token included in the request is expired",
        "aws",
        "ExpiredToken",
    ),
    # S3 REST error body
    (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied</Message><RequestId>ABC</RequestId></Error>',
        "aws",
        "AccessDenied",
    ),
    # aws-sdk-go-v2 OperationError
    (
        "operation error S3: GetObject, https response error StatusCode: 404, RequestID: X, HostID: Y, api error NoSuchKey: The specified key does not exist.",
        "aws",
        "NoSuchKey",
    ),
    # AWS SDK for Java v2 service exception suffix
    (
        "software.amazon.awssdk.services.dynamodb.model.ResourceNotFoundException: Requested resource not found (Service: DynamoDb, Status Code: 400, Error Code: ResourceNotFoundException, Request ID: X)",
        "aws",
        "ResourceNotFoundException",
    ),
    # aws-sdk-go (v1) awserr.RequestFailure
    ("ThrottlingException: Rate exceeded\n\tstatus code: 400, request id: 1f2e", "aws", "ThrottlingException"),
    # the same shape as one bullet of hashicorp/go-multierror's list ("%d errors occurred:\n\t* %s")
    (
        "2 errors occurred:\n\t* ConditionalCheckFailedException: The conditional request failed\n"
        "\tstatus code: 400, request id: 7Q\n\t* unexpected end of JSON input\n\n",
        "aws",
        "ConditionalCheckFailedException",
    ),
    # az CLI
    (
        "(AuthorizationFailed) The client 'x' with object id 'y' does not have authorization to perform action 'Microsoft.Resources/subscriptions/resourcegroups/read'\nCode: AuthorizationFailed\nMessage: The client ...",
        "azure",
        "AuthorizationFailed",
    ),
    # Azure Storage SDK
    (
        "This request is not authorized to perform this operation using this permission.\nRequestId:x\nTime:y\nErrorCode:AuthorizationPermissionMismatch",
        "azure",
        "AuthorizationPermissionMismatch",
    ),
    # az / MSAL: the Entra error in error_description
    (
        "AADSTS700082: The refresh token has expired due to inactivity. The token was issued on 2024-01-01 and was inactive for 90.00:00:00.",
        "aadsts",
        "AADSTS700082",
    ),
    # git push to GitHub with push protection
    (
        "remote: error: GH013: Repository rule violations found for refs/heads/main.\nremote: - GITHUB PUSH PROTECTION",
        "github",
        "GH013",
    ),
    # gcloud ErrorInfo details
    (
        "ERROR: (gcloud.services.list) PERMISSION_DENIED: Cloud Resource Manager API has not been used in project 1 before or it is disabled.\n- '@type': type.googleapis.com/google.rpc.ErrorInfo\n  domain: googleapis.com\n  reason: SERVICE_DISABLED",
        "google",
        "SERVICE_DISABLED",
    ),
    (
        "ERROR: (gcloud.services.list) PERMISSION_DENIED: Cloud Resource Manager API has not been used in project 1 before or it is disabled.",
        "grpc",
        "PERMISSION_DENIED",
    ),
    # googleapiclient HttpError with legacy details
    (
        "<HttpError 403 when requesting https://www.googleapis.com/drive/v3/files returned \"User rate limit exceeded\". Details: \"[{'message': 'User Rate Limit Exceeded', 'domain': 'usageLimits', 'reason': 'userRateLimitExceeded'}]\">",
        "google",
        "userRateLimitExceeded",
    ),
    # slack_sdk SlackApiError
    (
        "slack_sdk.errors.SlackApiError: The request to the Slack API failed. (url: https://slack.com/api/chat.postMessage)\nThe server responded with: {'ok': False, 'error': 'missing_scope', 'needed': 'chat:write', 'provided': 'channels:read'}",
        "slack",
        "missing_scope",
    ),
    # @slack/web-api
    ("Error: An API error occurred: invalid_auth", "slack", "invalid_auth"),
    # google-auth RefreshError
    (
        "google.auth.exceptions.RefreshError: ('invalid_grant: Token has been expired or revoked.', {'error': 'invalid_grant', 'error_description': 'Token has been expired or revoked.'})",
        "oauth",
        "invalid_grant",
    ),
    # RFC 6750 3: the WWW-Authenticate challenge
    (
        'WWW-Authenticate: Bearer realm="example", error="invalid_token", error_description="The access token expired"',
        "oauth",
        "invalid_token",
    ),
    # openai-python APIStatusError
    (
        "openai.AuthenticationError: Error code: 401 - {'error': {'message': 'Incorrect API key provided: sk-***.', 'type': 'invalid_request_error', 'param': None, 'code': 'invalid_api_key'}}",
        "openai",
        "invalid_api_key",
    ),
    # anthropic-sdk-python
    (
        "anthropic.InternalServerError: Error code: 529 - {'type': 'error', 'error': {'type': 'overloaded_error', 'message': 'Overloaded'}}",
        "anthropic",
        "overloaded_error",
    ),
    # Stripe API error body
    (
        '{\n  "error": {\n    "code": "resource_missing",\n    "doc_url": "https://stripe.com/docs/error-codes/resource-missing",\n    "message": "No such customer: \'cus_x\'",\n    "type": "invalid_request_error"\n  }\n}',
        "stripe",
        "resource_missing",
    ),
    # twilio-python TwilioRestException
    (
        "HTTP Error Your request was:\n\nPOST /Accounts/AC1/Messages.json\n\nTwilio returned the following information:\n\nUnable to create record: Authenticate\n\nMore information may be available here:\n\nhttps://www.twilio.com/docs/errors/20003",
        "twilio",
        "20003",
    ),
    # @modelcontextprotocol/sdk McpError
    ("McpError: MCP error -32001: Request timed out", "jsonrpc", "-32001"),
    ('{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Invalid params"}}', "jsonrpc", "-32602"),
    # kubectl
    (
        'Error from server (Forbidden): pods is forbidden: User "dev" cannot list resource "pods" in API group "" in the namespace "prod"',
        "kubernetes",
        "Forbidden",
    ),
    # Apollo Server response
    (
        '{"errors":[{"message":"Context creation failed: not signed in","extensions":{"code":"UNAUTHENTICATED"}}]}',
        "graphql",
        "UNAUTHENTICATED",
    ),
    # GitHub GraphQL error
    (
        '{"data":null,"errors":[{"type":"NOT_FOUND","path":["repository"],"message":"Could not resolve to a Repository"}]}',
        "github",
        "NOT_FOUND",
    ),
    # grpc-go status.Err(): "rpc error: code = %s desc = %s"
    ("rpc error: code = DeadlineExceeded desc = context deadline exceeded", "grpc", "DEADLINE_EXCEEDED"),
    # grpcio _InactiveRpcError
    (
        'grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that terminated with:\n\tstatus = StatusCode.RESOURCE_EXHAUSTED\n\tdetails = "Quota exceeded"',
        "grpc",
        "RESOURCE_EXHAUSTED",
    ),
    # @grpc/grpc-js: `${code} ${Status[code]}: ${details}`
    ("Error: 14 UNAVAILABLE: No connection established", "grpc", "UNAVAILABLE"),
    # grpc-java
    (
        "io.grpc.StatusRuntimeException: UNAUTHENTICATED: Request had invalid authentication credentials.",
        "grpc",
        "UNAUTHENTICATED",
    ),
    # grpcurl
    ("ERROR:\n  Code: PermissionDenied\n  Message: missing role", "grpc", "PERMISSION_DENIED"),
    # HTTP/2 trailer with a gRPC context
    ("< grpc-status: 8\n< grpc-message: quota", "grpc_number", "8"),
    # pgx: "%s: %s (SQLSTATE %s)"
    ('FATAL: password authentication failed for user "app" (SQLSTATE 28P01)', "sqlstate", "28P01"),
    # PHP PDO
    ("SQLSTATE[53300]: Too many connections: 7 FATAL:  sorry, too many clients already", "sqlstate", "53300"),
    # Postgrex
    ("** (Postgrex.Error) FATAL 53300 (too_many_connections) sorry, too many clients already", "sqlstate", "53300"),
    # psycopg2 through SQLAlchemy
    (
        "sqlalchemy.exc.OperationalError: (psycopg2.errors.TooManyConnections) sorry, too many clients already",
        "sqlstate",
        "53300",
    ),
    # mysql client: "ERROR %d (%s): %s"
    ("ERROR 1045 (28000): Access denied for user 'root'@'localhost' (using password: YES)", "mysql", "1045"),
    # PyMySQL
    ('pymysql.err.OperationalError: (1040, "Too many connections")', "mysql", "1040"),
    # mysql2 (Node.js)
    (
        "Error: Access denied for user 'app'@'10.0.0.1' (using password: YES)\n    at Packet.asError\n  code: 'ER_ACCESS_DENIED_ERROR',\n  errno: 1045,",
        "mysql",
        "1045",
    ),
    # redis-cli: "(error) %s"
    ("(error) LOADING Redis is loading the dataset in memory", "redis", "LOADING"),
    # RESP on the wire
    ("-NOAUTH Authentication required.\r\n", "redis", "NOAUTH"),
    # ioredis / node-redis
    ("ReplyError: WRONGPASS invalid username-password pair or user is disabled.", "redis", "WRONGPASS"),
    # go-redis: the reply text
    ("NOPERM User app has no permissions to run the 'flushall' command", "redis", "NOPERM"),
    # pnpm
    (
        ' ERR_PNPM_OUTDATED_LOCKFILE  Cannot install with "frozen-lockfile" because pnpm-lock.yaml is not up to date',
        "npm",
        "ERR_PNPM_OUTDATED_LOCKFILE",
    ),
    # npm >= 10
    ("npm error code ERESOLVE\nnpm error ERESOLVE unable to resolve dependency tree", "npm", "ERESOLVE"),
    # Ruby
    ("Errno::EACCES: Permission denied @ rb_sysopen - /etc/shadow", "errno", "EACCES"),
    # Node.js dns (getaddrinfo): `${syscall} ${code} ${hostname}`
    ("Error: getaddrinfo EAI_AGAIN registry.npmjs.org\n    at GetAddrInfoReqWrap.onlookup", "errno", "EAI_AGAIN"),
    # Rust std::io::Error Display
    ("Error: No space left on device (os error 28)", "errno", "ENOSPC"),
    # Playwright's failed navigation: the frame's error text, net::ErrorToString (net/base/net_errors.cc)
    ("Error: page.goto: net::ERR_NAME_NOT_RESOLVED at https://example.invalid/", "chromium_net", "NAME_NOT_RESOLVED"),
    # Python socket.gaierror
    ("socket.gaierror: [Errno -3] Temporary failure in name resolution", "errno", "EAI_AGAIN"),
    # Java ProcessBuilder
    ('java.io.IOException: Cannot run program "gh": error=2, No such file or directory', "errno", "ENOENT"),
    # undici (Node.js fetch) cause
    (
        "TypeError: fetch failed\n  [cause]: ConnectTimeoutError: Connect Timeout Error\n    code: 'UND_ERR_CONNECT_TIMEOUT'",
        "node",
        "UND_ERR_CONNECT_TIMEOUT",
    ),
]


@pytest.mark.parametrize(("text", "table", "code"), DOCUMENTED, ids=lambda v: str(v)[:40])
def test_a_code_printed_in_its_programs_format_is_found(text: str, table: str, code: str) -> None:
    assert (table, code) in found(text)


def test_every_token_table_has_a_documented_or_real_shape_above() -> None:
    documented = {table for _, table, _ in DOCUMENTED}
    real = {"errno", "node", "npm", "tls", "sqlstate"}
    token_tables = {spec.name for spec in TABLES.tables if spec.patterns}
    assert token_tables <= documented | real


@pytest.mark.parametrize(
    "text",
    [
        "The ENOENT, EACCES and E401 codes are explained in the README.",
        "LOADING the model took a while; the service was UNAVAILABLE earlier.",
        "AccessDenied and NoSuchBucket are S3 codes; ExpiredToken is an STS code.",
        "Use SQLSTATE values from the appendix, and grpc codes from statuscodes.md.",
        "See AADSTS codes online.",
        "const code = err.code; if (code === 'EPERM') retry()",
        "def handle(e): return e.errno",
    ],
)
def test_a_code_named_in_prose_is_not_a_token(text: str) -> None:
    assert TABLES.in_text(text) == ()


def test_codes_come_in_table_priority_order_then_order_of_appearance_without_repeats() -> None:
    text = (
        "npm error code ENOSPC\nError: ENOSPC: no space left on device, write\n"
        "Error: EACCES: permission denied, open '/x'\nnpm error code E401\n"
    )
    assert [(v.table, v.code) for v in TABLES.in_text(text)] == [
        ("npm", "E401"),
        ("errno", "ENOSPC"),
        ("errno", "EACCES"),
    ]


def test_in_text_reads_at_most_max_hits_matches_per_table() -> None:
    text = "Error: EACCES: permission denied\n" * (MAX_HITS + 10) + "Error: ENOSPC: no space left on device\n"
    assert [(v.table, v.code) for v in TABLES.in_text(text)] == [("errno", "EACCES")]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_in_text_and_status_in_text_never_raise_on_arbitrary_text(text: str) -> None:
    verdicts = TABLES.in_text(text)
    assert all(isinstance(v, CodeVerdict) for v in verdicts)
    status = TABLES.status_in_text(text)
    assert status is None or 100 <= status <= 599


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["code", "type", "status", "reason", "error", "errno", "sqlstate", "__type", "x"]),
    st.one_of(st.text(), st.integers(), st.booleans()),
)
def test_for_field_never_raises_on_arbitrary_values(leaf: str, value: str | int) -> None:
    verdict = TABLES.for_field(leaf, value, text=str(value))
    assert verdict is None or isinstance(verdict.kind, Kind)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("EACS: ()[]'\"-0123456789\nerrorcode=HTTP/1.")), max_size=200))
def test_shapes_made_of_code_characters_never_raise(text: str) -> None:
    TABLES.in_text(text)
    TABLES.status_in_text(text)


# --- HTTP statuses ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("HTTP/1.1 403 Forbidden", 403),
        ("HTTP/2 429", 429),
        ("HTTP 403: Resource not accessible by integration (https://api.github.com/repos/o/r/issues)", 403),
        ("failed (http 401)", 401),
        ("Request failed with status code 429", 429),
        ("statusCode=407", 407),
        ('{"statusCode": 502, "message": "Bad Gateway"}', 502),
        ("openai.RateLimitError: Error code: 429 - {'error': {}}", 429),
        ("curl: (22) The requested URL returned error: 403", 403),
        ('{"status": 503}', 503),
        ("<html><head><title>504 Gateway Time-out</title></head>", 504),
        ("429 Too Many Requests", 429),
        ("requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://example.test/x", 404),
        ("HTTP/1.1 301 Moved Permanently\nLocation: /b\n\nHTTP/1.1 403 Forbidden", 403),
        ("HTTP/1.1 200 OK", 200),
    ],
)
def test_a_status_stated_with_context_is_read(text: str, status: int) -> None:
    assert TABLES.status_in_text(text) == status


@pytest.mark.parametrize(
    "text",
    [
        "took 503 ms",
        "listening on port 5432",
        '  File "/srv/app.py", line 404, in handler',
        "2024-05-03 12:04:05 started",
        "wrote 404 bytes",
        "pid 503 exited",
        "process exited with exit status: 127",
        "Status: done in 429s",
        "",
    ],
)
def test_a_number_without_http_context_is_not_a_status(text: str) -> None:
    assert TABLES.status_in_text(text) is None


@needs_curl
def test_curl_fail_on_a_refusing_server_states_the_status(http_server: str) -> None:
    text = run(["curl", "-sS", "-f", f"{http_server}/s/403"])
    assert TABLES.status_in_text(text) == 403
    head = run(["curl", "-sS", "-i", f"{http_server}/s/503"])
    assert TABLES.status_in_text(head) == 503


def test_python_urllib_http_error_states_the_status(http_server: str) -> None:
    text = run([sys.executable, "-c", f"import urllib.request; urllib.request.urlopen('{http_server}/s/503')"])
    assert "HTTP Error 503: Service Unavailable" in text
    assert TABLES.status_in_text(text) == 503


def test_a_python_traceback_line_number_is_not_a_status(tmp_path: Path) -> None:
    script = tmp_path / "deep.py"
    script.write_text("\n" * 403 + "raise RuntimeError('boom')\n")
    text = run([sys.executable, str(script)])
    assert "line 404" in text
    assert TABLES.status_in_text(text) is None


def test_http_status_reads_the_status_table() -> None:
    forbidden = TABLES.http_status(403)
    assert forbidden is not None and (forbidden.table, forbidden.code, forbidden.kind) == (
        "http",
        "403",
        Kind.PERMISSION,
    )
    assert TABLES.http_status(200) is None
    assert TABLES.http_status(999) is None


# --- merging a user's tables ----------------------------------------------------------------------


def test_a_users_tables_come_ahead_of_the_bundled_ones() -> None:
    mine = load_code_tables(
        "tables:\n  - name: mine\n    source: 'my notes'\n    fields: [code]\n"
        "    patterns: ['\\bcode: ''({codes})''']\n    rows:\n      EACCES: {kind: auth}\n",
        where="mine.yaml",
    )
    merged = merge_code_tables(TABLES, mine)
    assert merged.names == ("mine", *TABLES.names)
    verdict = merged.for_field("code", "EACCES")
    assert verdict is not None and (verdict.table, verdict.kind) == ("mine", Kind.AUTH)
    assert [v.table for v in merged.in_text("code: 'EACCES'")] == ["mine", "errno"]


def test_a_user_table_named_like_a_bundled_one_is_refused() -> None:
    clash = load_code_tables(
        "tables:\n  - name: errno\n    source: s\n    rows:\n      X: {kind: auth}\n", where="u.yaml"
    )
    with pytest.raises(ValueError, match="'errno' in both"):
        merge_code_tables(TABLES, clash)


def test_tables_built_from_records_validate_like_loaded_ones() -> None:
    spec = TABLES.tables[0]
    with pytest.raises(ValueError, match="defined twice"):
        CodeTables([spec, spec])
