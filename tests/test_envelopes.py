"""unstuck.recognise.envelopes: the error envelopes tools print, found in their output text.

Every body below is written in the vendor's documented format (the source is named beside it);
the expected codes, flags and statuses are what that format and the module's rules say, never
output copied from the code. Where a real program prints the envelope (kubectl, the AWS CLI,
curl, Python's own repr and json), the test runs the program against a server on 127.0.0.1.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import bare_env
from unstuck.recognise.envelopes import (
    MAX_ATTEMPTS,
    MAX_CANDIDATES,
    MAX_ENVELOPES,
    MAX_ESCAPE_LEVELS,
    MAX_REPR_ATTEMPTS,
    MAX_REPR_DEPTH,
    MAX_SCAN_CHARS,
    MAX_SPAN,
    CodeField,
    Envelope,
    Framing,
    Shape,
    find_envelopes,
    sanitize_aws_error_type,
    scan_envelopes,
)

# --- helpers ----------------------------------------------------------------------------------


def only(text: str) -> Envelope:
    found = find_envelopes(text)
    assert len(found) == 1, found
    return found[0]


def codes(envelope: Envelope) -> dict[str, str | int]:
    return {code.path: code.value for code in envelope.codes}


Serve = Callable[..., int]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Start an HTTP server on 127.0.0.1 answering every request with one fixed response."""
    servers: list[http.server.HTTPServer] = []

    def start(status: int, content_type: str, body: bytes, headers: Sequence[tuple[str, str]] = ()) -> int:
        class Handler(http.server.BaseHTTPRequestHandler):
            def _reply(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _reply  # noqa: N815 (http.server's handler names)

            def log_message(self, *args: object) -> None:
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return int(server.server_address[1])

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


# --- JSON anywhere in the text ----------------------------------------------------------------

# OpenAI's error body (platform.openai.com/docs/guides/error-codes): error.type, error.code.
OPENAI_401 = {
    "error": {
        "message": "Incorrect API key provided: sk-abc123. You can find your API key at https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}


def test_json_after_an_error_code_prefix_reports_the_error_type_and_code() -> None:
    text = "openai.AuthenticationError: Error code: 401 - " + json.dumps(OPENAI_401)
    envelope = only(text)
    assert (envelope.shape, envelope.framing, envelope.failed) == (Shape.REST, Framing.JSON, True)
    assert codes(envelope) == {"error.type": "invalid_request_error", "error.code": "invalid_api_key"}
    assert envelope.messages == (OPENAI_401["error"]["message"],)
    assert text[envelope.start : envelope.end] == json.dumps(OPENAI_401)


def test_python_repr_of_the_openai_body_with_none_is_read_as_a_dict_repr() -> None:
    # openai-python 1.x formats APIStatusError as f"Error code: {status} - {body}", body a dict.
    text = f"Error code: 401 - {OPENAI_401!r}"
    envelope = only(text)
    assert (envelope.framing, envelope.failed) == (Framing.DICT_REPR, True)
    assert codes(envelope) == {"error.type": "invalid_request_error", "error.code": "invalid_api_key"}
    assert text[envelope.start : envelope.end] == repr(OPENAI_401)


def test_slack_sdk_error_repr_with_false_is_failed_with_the_slack_error_code() -> None:
    # slack_sdk SlackApiError: "...failed. (url: ...)\nThe server responded with: {response!r}";
    # Slack Web API: "ok" false and "error" a short machine-readable code.
    body = {"ok": False, "error": "missing_scope", "needed": "chat:write:bot", "provided": "incoming-webhook"}
    text = f"The request to the Slack API failed. (url: https://slack.com/api/chat.postMessage)\nThe server responded with: {body!r}"
    envelope = only(text)
    assert (envelope.shape, envelope.framing, envelope.failed) == (Shape.REST, Framing.DICT_REPR, True)
    assert codes(envelope) == {"error": "missing_scope"}


def test_dict_repr_with_true_and_none_is_a_success_envelope() -> None:
    text = "result: " + repr({"ok": True, "error": None, "warning": None, "ts": "1712345678.000200"})
    envelope = only(text)
    assert (envelope.framing, envelope.failed, envelope.codes) == (Framing.DICT_REPR, False, ())


def test_dict_repr_nested_deeper_than_its_cap_is_not_evaluated() -> None:
    level = "{'error': "
    deep = level * 40 + "'x'" + "}" * 40
    # only the innermost MAX_REPR_DEPTH levels are a literal shallow enough to read
    assert [e.start for e in find_envelopes(deep)] == [len(level) * (40 - MAX_REPR_DEPTH)]


def test_slack_json_with_ok_false_is_failed_and_ok_true_is_not() -> None:
    failed = only('{"ok": false, "error": "channel_not_found"}')
    succeeded = only('{"ok": true, "channel": "C024BE91L", "ts": "1401383885.000061"}')
    assert (failed.failed, codes(failed)) == (True, {"error": "channel_not_found"})
    assert (succeeded.failed, succeeded.codes) == (False, ())


def test_json_in_prose_yields_nothing_and_does_not_raise() -> None:
    assert find_envelopes("the {braces} here, [brackets] there, a {\"half open, and {'x': } too") == ()


def test_a_plain_data_document_is_not_an_envelope() -> None:
    assert find_envelopes(json.dumps({"name": "unstuck", "version": "0.1.0", "tags": ["a", "b"]})) == ()


# --- Kubernetes Status (kubernetes.io API reference, meta/v1 Status) ---------------------------

K8S_FORBIDDEN = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": 'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "default"',
    "reason": "Forbidden",
    "details": {"kind": "pods"},
    "code": 403,
}


def test_pretty_printed_kubernetes_status_is_a_failure_with_reason_and_code() -> None:
    # kubernetes-client/python ApiException: "Reason: ...\nHTTP response headers: ...\nHTTP response body: {body}"
    text = "(403)\nReason: Forbidden\nHTTP response body: " + json.dumps(K8S_FORBIDDEN, indent=2) + "\n"
    envelope = only(text)
    assert (envelope.shape, envelope.failed, envelope.status) == (Shape.K8S_STATUS, True, 403)
    assert codes(envelope) == {"status": "Failure", "reason": "Forbidden", "code": 403}
    assert envelope.messages == (K8S_FORBIDDEN["message"],)


def test_kubernetes_status_causes_are_read() -> None:
    body = {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'Deployment.apps "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0',
        "reason": "Invalid",
        "details": {"name": "web", "group": "apps", "kind": "Deployment",
                    "causes": [{"reason": "FieldValueInvalid", "message": "Invalid value: -1", "field": "spec.replicas"}]},
        "code": 422,
    }
    envelope = only(json.dumps(body))
    assert codes(envelope) == {"status": "Failure", "reason": "Invalid", "code": 422, "details.causes.reason": "FieldValueInvalid"}
    assert envelope.status == 422


def test_kubernetes_success_status_is_not_failed() -> None:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": "web", "group": "apps", "kind": "deployments", "uid": "1b2c"}}
    envelope = only(json.dumps(body))
    assert (envelope.shape, envelope.failed) == (Shape.K8S_STATUS, False)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_real_kubectl_verbose_log_prints_the_status_escaped_in_a_log_line(serve: Serve, tmp_path: Path) -> None:
    port = serve(403, "application/json", json.dumps(K8S_FORBIDDEN).encode())
    run = subprocess.run(
        ["kubectl", "get", "pods", "--server", f"http://127.0.0.1:{port}", "-v=8", "--request-timeout=5s"],
        capture_output=True, text=True, timeout=60,
        env=bare_env(home=tmp_path, PATH=os.environ["PATH"], KUBECONFIG=os.devnull),
    )
    assert run.returncode != 0
    statuses = [e for e in find_envelopes(run.stdout + run.stderr) if e.shape is Shape.K8S_STATUS]
    assert statuses, run.stderr[-2000:]
    assert all(e.framing is Framing.ESCAPED_JSON and e.escaped == 1 for e in statuses)
    assert all(codes(e) == {"status": "Failure", "reason": "Forbidden", "code": 403} and e.status == 403 for e in statuses)


# --- JSON lines, split log lines, escaped JSON --------------------------------------------------


def test_json_lines_are_each_an_envelope_framed_as_json_lines() -> None:
    # zap's production encoder: {"level", "ts", "caller", "msg", ...} one object per line.
    text = (
        '{"level":"info","ts":1712345678.1,"caller":"server/main.go:41","msg":"listening","addr":":8080"}\n'
        '{"level":"error","ts":1712345679.2,"caller":"server/db.go:88","msg":"query failed","error":"pq: too many clients already"}\n'
    )
    first, second = find_envelopes(text)
    assert (first.shape, first.framing, first.failed) == (Shape.JSON_LOG, Framing.JSON_LINES, False)
    assert (second.shape, second.framing, second.failed) == (Shape.JSON_LOG, Framing.JSON_LINES, True)
    assert second.messages == ("query failed", "pq: too many clients already")


def test_json_body_split_over_timestamped_log_lines_is_joined() -> None:
    # Anthropic error body (docs.anthropic.com "Errors"), printed by a logger that wrapped it.
    text = (
        '[26-03-10 10:50:17] Failed to call model {"type":"error","error":{"type":"authentication_error","message":"OAuth token has expired.\n'
        '[26-03-10 10:50:17] Please obtain a new token."},"request_id":"req_1"}\n'
        "[26-03-10 10:50:18] giving up\n"
    )
    envelope = only(text)
    assert (envelope.framing, envelope.failed) == (Framing.SPLIT_LOG_JSON, True)
    assert codes(envelope) == {"type": "error", "error.type": "authentication_error"}
    assert envelope.messages == ("OAuth token has expired.\nPlease obtain a new token.",)
    assert text[envelope.start : envelope.end].endswith('"request_id":"req_1"}')


def test_split_body_is_joined_when_the_timestamp_changes_between_lines() -> None:
    text = (
        "2026-03-10T10:50:17.123Z ERROR api  response body: {\"error\": {\"code\": 403,\n"
        "2026-03-10T10:50:18.907Z ERROR api   \"message\": \"The caller does not have permission\", \"status\": \"PERMISSION_DENIED\"}}\n"
    )
    envelope = only(text)
    assert envelope.framing is Framing.SPLIT_LOG_JSON
    assert codes(envelope) == {"error.code": 403, "error.status": "PERMISSION_DENIED"}
    assert envelope.status == 403


def nest(value: object, levels: int) -> str:
    """``value`` as JSON, held as a string inside ``{"error": "Error: 400 <json>"}`` ``levels`` times."""
    text = json.dumps(value)
    for _ in range(levels):
        text = json.dumps({"error": "Error: 400 " + text})
    return text


ANTHROPIC_400 = {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}}


def test_three_levels_of_escaped_json_are_each_parsed() -> None:
    text = nest(ANTHROPIC_400, 3)
    found = find_envelopes(text)
    assert [e.escaped for e in found] == [0, 1, 2, 3]
    assert [e.framing for e in found] == [Framing.JSON] + [Framing.ESCAPED_JSON] * 3
    innermost = found[-1]
    assert codes(innermost) == {"type": "error", "error.type": "invalid_request_error"}
    assert all((e.start, e.end) == (0, len(text)) for e in found)


def test_escaping_deeper_than_the_cap_is_not_parsed() -> None:
    found = find_envelopes(nest(ANTHROPIC_400, MAX_ESCAPE_LEVELS + 1))
    assert max(e.escaped for e in found) == MAX_ESCAPE_LEVELS
    assert all(codes(e).get("error.type") != "invalid_request_error" for e in found)


def test_a_bare_escaped_json_body_in_the_text_is_parsed() -> None:
    body = json.dumps(ANTHROPIC_400)
    escaped = json.dumps(body)[1:-1]  # the inside of a JSON string, as a log prints it
    text = f'msg="request failed" body="{escaped}" attempt=1'
    envelope = only(text)
    assert (envelope.framing, envelope.escaped) == (Framing.ESCAPED_JSON, 1)
    assert codes(envelope) == {"type": "error", "error.type": "invalid_request_error"}
    assert text[envelope.start : envelope.end] == escaped


def test_strings_of_a_plain_document_are_scanned_but_a_success_payload_is_not() -> None:
    wrapped = only(json.dumps({"output": "Error: 429 " + json.dumps({"error": {"type": "rate_limit_error", "message": "slow down"}})}))
    assert (wrapped.escaped, codes(wrapped)) == (1, {"error.type": "rate_limit_error"})
    payload = find_envelopes(json.dumps({"ok": True, "data": {"note": json.dumps({"error": "channel_not_found"})}}))
    assert [(e.failed, e.escaped) for e in payload] == [(False, 0)]


# --- GraphQL, JSON-RPC, MCP --------------------------------------------------------------------


def test_graphql_errors_report_type_and_extensions_code() -> None:
    # GraphQL spec "Response" errors entries; GitHub adds "type", Apollo Server "extensions.code".
    body = {
        "data": {"repository": None},
        "errors": [
            {"type": "NOT_FOUND", "path": ["repository"], "locations": [{"line": 7, "column": 3}],
             "message": "Could not resolve to a Repository with the name 'octocat/nope'."},
            {"message": "You must be logged in", "extensions": {"code": "UNAUTHENTICATED"}},
        ],
    }
    envelope = only(json.dumps(body, indent=2))
    assert (envelope.shape, envelope.failed) == (Shape.GRAPHQL, True)
    assert codes(envelope) == {"errors.type": "NOT_FOUND", "errors.extensions.code": "UNAUTHENTICATED"}
    assert envelope.messages == ("Could not resolve to a Repository with the name 'octocat/nope'.", "You must be logged in")


def test_graphql_data_without_errors_is_a_success_envelope() -> None:
    envelope = only('{"data": {"viewer": {"login": "octocat"}}}')
    assert (envelope.shape, envelope.failed) == (Shape.GRAPHQL, False)


def test_jsonrpc_error_reports_its_numeric_code() -> None:
    # jsonrpc.org/specification, "Error object" example.
    envelope = only('--> {"jsonrpc": "2.0", "method": "foobar", "id": "1"}\n<-- {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "1"}')
    assert (envelope.shape, envelope.failed, codes(envelope)) == (Shape.JSON_RPC, True, {"error.code": -32601})
    assert envelope.status is None


def test_jsonrpc_result_is_a_success_envelope() -> None:
    envelope = only('{"jsonrpc": "2.0", "result": 19, "id": 1}')
    assert (envelope.shape, envelope.failed) == (Shape.JSON_RPC, False)


def test_mcp_tool_result_with_is_error_is_failed_and_its_text_is_a_message() -> None:
    # MCP specification, "Tools": a tool execution error reported in the result.
    body = {"jsonrpc": "2.0", "id": 4, "result": {"content": [{"type": "text", "text": "Failed to fetch weather data: API rate limit exceeded"}], "isError": True}}
    envelope = only(json.dumps(body))
    assert (envelope.shape, envelope.failed) == (Shape.MCP_RESULT, True)
    assert envelope.messages == ("Failed to fetch weather data: API rate limit exceeded",)


def test_mcp_result_text_holding_an_error_body_is_read_one_level_deeper() -> None:
    google = {"error": {"code": 403, "message": "Permission denied on resource project demo.", "status": "PERMISSION_DENIED"}}
    body = {"content": [{"type": "text", "text": json.dumps(google)}], "isError": True}
    outer, inner = find_envelopes(json.dumps(body))
    assert (outer.shape, outer.failed, outer.escaped) == (Shape.MCP_RESULT, True, 0)
    assert (inner.escaped, inner.status, codes(inner)) == (1, 403, {"error.code": 403, "error.status": "PERMISSION_DENIED"})


def test_mcp_result_without_is_error_is_not_failed() -> None:
    envelope = only('{"content": [{"type": "text", "text": "3 files changed"}], "isError": false}')
    assert (envelope.shape, envelope.failed) == (Shape.MCP_RESULT, False)


# --- AWS, Azure, gRPC -----------------------------------------------------------------------

S3_NO_SUCH_KEY = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error>\n  <Code>NoSuchKey</Code>\n'
    "  <Message>The resource you requested does not exist</Message>\n  <Resource>/mybucket/myfoto.jpg</Resource>\n"
    "  <RequestId>4442587FB7D0A2F9</RequestId>\n</Error>"
)  # Amazon S3 API reference, "Error responses"

STS_EXPIRED = (
    '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">\n  <Error>\n    <Type>Sender</Type>\n'
    "    <Code>ExpiredToken</Code>\n    <Message>The security token included in the request is expired</Message>\n"
    "  </Error>\n  <RequestId>4d27a7b3-8f4e-4e8b-9d4c-2d5f1d8a1b2c</RequestId>\n</ErrorResponse>\n"
)  # the AWS query protocol's error body (STS, IAM, SQS, SNS)


def test_s3_xml_error_reports_code_and_message() -> None:
    envelope = only(S3_NO_SUCH_KEY)
    assert (envelope.shape, envelope.framing, envelope.failed) == (Shape.AWS_XML, Framing.XML, True)
    assert codes(envelope) == {"Error.Code": "NoSuchKey"}
    assert envelope.codes[0].leaf == "Code"
    assert envelope.messages == ("The resource you requested does not exist",)


def test_query_api_xml_error_reports_type_and_code() -> None:
    envelope = only(STS_EXPIRED)
    assert codes(envelope) == {"ErrorResponse.Error.Type": "Sender", "ErrorResponse.Error.Code": "ExpiredToken"}


def test_ec2_xml_error_response_reports_its_code() -> None:
    # Amazon EC2 API reference, "Error codes": example error response.
    text = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code>"
            "<Message>The instance ID 'i-1a2b3c4d' does not exist</Message></Error></Errors>"
            "<RequestID>ea966190-f9aa-478e-9ede-example</RequestID></Response>")
    envelope = only(text)
    assert codes(envelope) == {"Response.Errors.Error.Code": "InvalidInstanceID.NotFound"}


@pytest.mark.skipif(shutil.which("aws") is None, reason="the AWS CLI is not installed")
def test_real_aws_cli_debug_output_holds_the_query_xml_error(serve: Serve, tmp_path: Path) -> None:
    port = serve(403, "text/xml", STS_EXPIRED.encode())
    run = subprocess.run(
        ["aws", "sts", "get-caller-identity", "--endpoint-url", f"http://127.0.0.1:{port}", "--debug"],
        capture_output=True, text=True, timeout=120,
        env=bare_env(home=tmp_path, PATH=os.environ["PATH"], AWS_ACCESS_KEY_ID="AKIDEXAMPLE",
                     AWS_SECRET_ACCESS_KEY="not-a-secret", AWS_DEFAULT_REGION="us-east-1",
                     AWS_EC2_METADATA_DISABLED="true", AWS_MAX_ATTEMPTS="1"),
    )
    assert run.returncode != 0
    xml = [e for e in find_envelopes(run.stderr) if e.shape is Shape.AWS_XML]
    assert xml, run.stderr[-2000:]
    assert codes(xml[0]) == {"ErrorResponse.Error.Type": "Sender", "ErrorResponse.Error.Code": "ExpiredToken"}


def test_aws_json_type_keeps_the_name_after_the_hash() -> None:
    # the awsJson protocols' error body: {"__type": "<namespace>#<name>", "message": ...}
    envelope = only('{"__type":"com.amazon.coral.service#ExpiredTokenException","message":"The security token included in the request is expired"}')
    assert (envelope.shape, envelope.failed) == (Shape.AWS_JSON, True)
    assert codes(envelope) == {"__type": "ExpiredTokenException"}
    assert envelope.codes[0].leaf == "__type"


@pytest.mark.parametrize(("raw", "sanitized"), [
    ("com.amazon.coral.service#ExpiredTokenException", "ExpiredTokenException"),
    ("ValidationException:http://internal.amazon.com/coral/com.amazon.coral.validate/", "ValidationException"),
    ("aws.protocoltests.restjson#FooError:http://internal.amazon.com/coral/com.amazon.coral.validate/", "FooError"),
    ("ThrottlingException", "ThrottlingException"),
])
def test_aws_error_types_are_sanitized_as_the_sdks_do(raw: str, sanitized: str) -> None:
    # AWS SDK for Go v2, restjson.SanitizeErrorCode: before the first ":", then after the first "#".
    assert sanitize_aws_error_type(raw) == sanitized


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_real_curl_prints_the_x_amzn_error_type_header_before_the_body(serve: Serve) -> None:
    body = b'{"message":"User: arn:aws:iam::123456789012:user/dev is not authorized to perform: lambda:GetFunction"}'
    port = serve(403, "application/json", body, [
        ("x-amzn-ErrorType", "AccessDeniedException:http://internal.amazon.com/coral/com.amazon.coral.service/"),
        ("x-amzn-RequestId", "1d2c3b4a"),
    ])
    run = subprocess.run(["curl", "-sS", "-i", f"http://127.0.0.1:{port}/2015-03-31/functions/f"],
                         capture_output=True, text=True, timeout=30)
    header, rest = find_envelopes(run.stdout)
    assert (header.shape, header.framing, header.failed) == (Shape.HEADER, Framing.HEADER, True)
    assert codes(header) == {"x-amzn-ErrorType": "AccessDeniedException"}
    assert (rest.shape, rest.failed, rest.messages) == (Shape.REST, False, (json.loads(body)["message"],))


def test_azure_storage_error_code_header_and_xml_body() -> None:
    # Azure Storage "Status and error codes": x-ms-error-code header and <Error><Code> body.
    text = ("HTTP/1.1 403 Server failed to authenticate the request.\r\nContent-Type: application/xml\r\n"
            "x-ms-error-code: AuthenticationFailed\r\nx-ms-request-id: 2a9e\r\n\r\n"
            '<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthenticationFailed</Code>'
            "<Message>Server failed to authenticate the request.</Message>"
            "<AuthenticationErrorDetail>Signature not valid in the specified time frame</AuthenticationErrorDetail></Error>")
    header, body = find_envelopes(text)
    assert codes(header) == {"x-ms-error-code": "AuthenticationFailed"}
    assert codes(body) == {"Error.Code": "AuthenticationFailed"}
    assert body.messages == ("Server failed to authenticate the request.", "Signature not valid in the specified time frame")


def test_grpc_status_header_that_is_not_zero_is_failed_and_its_message_is_percent_decoded() -> None:
    # gRPC PROTOCOL-HTTP2.md: grpc-status (a code), grpc-message (percent-encoded).
    text = "< HTTP/2 200\n< content-type: application/grpc\n< grpc-status: 14\n< grpc-message: upstream%20connect%20error\n"
    envelope = only(text)
    assert (envelope.shape, envelope.failed, codes(envelope)) == (Shape.HEADER, True, {"grpc-status": "14"})
    assert envelope.messages == ("upstream connect error",)
    assert only("grpc-status: 0\n").failed is False


# --- generic REST bodies ------------------------------------------------------------------------


def test_github_message_with_documentation_url_is_failed_and_states_its_status() -> None:
    # GitHub REST "Troubleshooting": {"message", "documentation_url", "status"}.
    envelope = only('{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest","status":"401"}')
    assert (envelope.failed, envelope.status, codes(envelope)) == (True, 401, {"status": "401"})
    assert envelope.messages == ("Bad credentials",)


def test_github_validation_errors_report_codes_and_string_errors_are_messages() -> None:
    detailed = only('{"message":"Validation Failed","errors":[{"resource":"Issue","field":"title","code":"missing_field"}],"documentation_url":"https://docs.github.com/rest/issues/issues#create-an-issue","status":"422"}')
    simple = only('{"message":"Validation Failed","errors":["Head sha can\'t be blank"],"documentation_url":"https://docs.github.com/rest"}')
    assert codes(detailed) == {"errors.code": "missing_field", "status": "422"}
    assert simple.messages == ("Validation Failed", "Head sha can't be blank")


def test_google_error_reports_status_and_the_error_info_reason() -> None:
    # AIP-193: error.code (HTTP), error.status (canonical code), details[] google.rpc.ErrorInfo.reason.
    body = {"error": {
        "code": 403,
        "message": "Cloud Pub/Sub API has not been used in project 123 before or it is disabled.",
        "status": "PERMISSION_DENIED",
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED",
                     "domain": "googleapis.com", "metadata": {"service": "pubsub.googleapis.com", "consumer": "projects/123"}}],
    }}
    envelope = only(json.dumps(body, indent=2))
    assert codes(envelope) == {"error.code": 403, "error.status": "PERMISSION_DENIED", "error.details.reason": "SERVICE_DISABLED"}
    assert envelope.status == 403


def test_azure_error_reports_code_and_inner_error_code() -> None:
    # Microsoft REST API guidelines: error.code, error.message, error.innererror.code.
    body = {"error": {"code": "AuthorizationFailed",
                      "message": "The client 'x' with object id 'y' does not have authorization to perform action 'Microsoft.Resources/subscriptions/resourcegroups/read'.",
                      "innererror": {"code": "RoleAssignmentMissing"}}}
    assert codes(only(json.dumps(body))) == {"error.code": "AuthorizationFailed", "error.innererror.code": "RoleAssignmentMissing"}


def test_oauth_error_with_entra_error_codes() -> None:
    # RFC 6749 §5.2 "error", "error_description"; Microsoft Entra ID adds "error_codes".
    body = {"error": "invalid_grant",
            "error_description": "AADSTS700082: The refresh token has expired due to inactivity.",
            "error_codes": [700082], "timestamp": "2026-03-10 10:50:17Z",
            "trace_id": "0d1e", "correlation_id": "2f3a", "error_uri": "https://login.microsoftonline.com/error?code=700082"}
    envelope = only(json.dumps(body))
    assert envelope.failed
    assert envelope.codes == (CodeField("error", "invalid_grant"), CodeField("error_codes", 700082))
    assert envelope.messages == ("AADSTS700082: The refresh token has expired due to inactivity.",)


def test_twilio_error_reports_its_code_and_http_status() -> None:
    # Twilio "API responses": code, message, more_info, status.
    body = {"code": 20003, "message": "Authenticate", "more_info": "https://www.twilio.com/docs/errors/20003", "status": 401}
    envelope = only(json.dumps(body))
    assert (envelope.failed, envelope.status, codes(envelope)) == (True, 401, {"code": 20003, "status": 401})


def test_problem_details_are_failed_with_type_and_status() -> None:
    # RFC 9457 §3 example.
    body = {"type": "https://example.com/probs/out-of-credit", "title": "You do not have enough credit.",
            "detail": "Your current balance is 30, but that costs 50.", "instance": "/account/12345/msgs/abc", "status": 403}
    envelope = only(json.dumps(body))
    assert (envelope.shape, envelope.failed, envelope.status) == (Shape.PROBLEM_DETAILS, True, 403)
    assert codes(envelope) == {"type": "https://example.com/probs/out-of-credit", "status": 403}
    assert envelope.messages == ("You do not have enough credit.", "Your current balance is 30, but that costs 50.")


def test_fastapi_detail_body_is_failed() -> None:
    # FastAPI "Handling Errors": HTTPException answers {"detail": ...}.
    assert only('{"detail":"Item not found"}').failed
    validation = only('{"detail":[{"type":"missing","loc":["body","name"],"msg":"Field required","input":{}}]}')
    assert (validation.failed, codes(validation)) == (True, {"detail.type": "missing"})


def test_jsend_status_fail_and_error_are_failed_and_success_is_not() -> None:
    # JSend: status "success" | "fail" | "error".
    assert only('{"status": "fail", "data": {"title": "A title is required"}}').failed
    assert only('{"status": "error", "message": "Unable to communicate with database"}').failed
    assert only('{"status": "success", "data": {"post": {"id": 1}}}').failed is False


def test_success_false_and_error_code_fields_are_failed() -> None:
    telegram = only('{"ok":false,"error_code":401,"description":"Unauthorized"}')  # Telegram Bot API
    assert (telegram.failed, telegram.status, codes(telegram)) == (True, 401, {"error_code": 401})
    assert only('{"success": false, "errors": [{"code": 10000, "message": "Authentication error"}]}').failed  # Cloudflare v4
    assert only('{"errcode": 0, "errmsg": "ok"}').failed is False  # WeChat


def test_a_root_code_holding_an_error_status_beside_a_message_is_failed() -> None:
    envelope = only('{"code": 404, "message": "Not Found"}')
    assert (envelope.failed, envelope.status, codes(envelope)) == (True, 404, {"code": 404})
    assert only('{"code": 0, "message": "success"}').failed is False


def test_an_error_object_printed_without_its_wrapper_is_failed_by_the_type_it_names() -> None:
    # openai-python keeps body["error"] as the exception's body: the inner object is printed alone.
    envelope = only(json.dumps({"message": "Your organization must be verified to stream this model.",
                                "type": "invalid_request_error", "param": "stream", "code": "unsupported_value"}))
    assert (envelope.failed, codes(envelope)) == (True, {"type": "invalid_request_error", "code": "unsupported_value"})
    assert only('{"message": "created", "type": "user"}').failed is False


def test_exception_class_name_is_a_code_inside_an_error_object() -> None:
    envelope = only('{"error": {"name": "HttpError", "status": 404, "message": "Not Found"}}')
    assert codes(envelope) == {"error.name": "HttpError", "error.status": 404}


def test_numeric_strings_stay_strings_and_bools_and_floats_are_never_codes() -> None:
    envelope = only('{"error": {"code": "404", "type": true, "reason": 1.5, "status": null}}')
    assert envelope.codes == (CodeField("error.code", "404"),)


def test_a_sentence_in_a_code_field_is_a_message() -> None:
    # Elasticsearch error bodies carry a sentence in "reason".
    body = {"error": {"root_cause": [{"type": "index_not_found_exception", "reason": "no such index [logs]"}],
                      "type": "index_not_found_exception", "reason": "no such index [logs]"}, "status": 404}
    envelope = only(json.dumps(body))
    assert codes(envelope) == {"status": 404, "error.root_cause.type": "index_not_found_exception", "error.type": "index_not_found_exception"}
    assert envelope.messages == ("no such index [logs]",)


# --- structured log lines ------------------------------------------------------------------------


def test_logfmt_error_line_is_failed_and_its_quoted_values_are_unescaped() -> None:
    # logrus' TextFormatter (logfmt): time, level, msg, fields.
    text = 'time="2026-03-10T10:50:17Z" level=error msg="pull failed" err="denied: requested access to the resource is \\"denied\\"" image=app:1\n'
    envelope = only(text)
    assert (envelope.shape, envelope.framing, envelope.failed) == (Shape.LOGFMT, Framing.LOGFMT, True)
    assert envelope.messages == ("pull failed", 'denied: requested access to the resource is "denied"')


def test_logfmt_info_line_is_a_success_envelope_and_a_key_value_line_without_a_level_is_none() -> None:
    assert only("level=info msg=started port=8080").failed is False
    assert find_envelopes("user=alice action=login") == ()


@pytest.mark.parametrize("key", ["level", "lvl", "severity", "levelname", "@l", "@level", "SeverityText"])
@pytest.mark.parametrize(("word", "failed"), [
    ("error", True), ("ERROR", True), ("fatal", True), ("critical", True), ("crit", True), ("panic", True),
    ("dpanic", True), ("alert", True), ("emerg", True), ("EMERGENCY", True), ("severe", True),
    ("info", False), ("warn", False), ("WARNING", False), ("debug", False), ("notice", False),
])
def test_json_log_level_words_say_failure(key: str, word: str, failed: bool) -> None:
    envelope = only(json.dumps({key: word, "msg": "x"}))
    assert (envelope.shape, envelope.failed) == (Shape.JSON_LOG, failed)


@pytest.mark.parametrize(("level", "failed"), [(10, False), (30, False), (40, False), (50, True), (60, True)])
def test_pino_and_bunyan_numeric_levels_of_fifty_and_up_are_failures(level: int, failed: bool) -> None:
    # bunyan/pino: 10 trace, 20 debug, 30 info, 40 warn, 50 error, 60 fatal; "name" is the logger's.
    envelope = only(json.dumps({"level": level, "time": 1712345678901, "pid": 7, "hostname": "h", "name": "api", "msg": "x"}))
    assert (envelope.failed, envelope.codes) == (failed, ())


def test_a_log_record_fails_by_its_level_not_by_the_request_it_describes() -> None:
    envelope = only('{"level":"info","msg":"request","method":"GET","path":"/x","status":503}')
    assert envelope.failed is False


def test_terraform_json_diagnostic_is_a_failed_log_record_with_its_summary_and_detail() -> None:
    # Terraform's machine-readable UI (-json), hclog's "@level"/"@message"; "type" is the record's.
    text = (
        '{"@level":"info","@message":"Terraform 1.9.5","@module":"terraform.ui","@timestamp":"2026-03-10T10:50:17.000000Z","terraform":"1.9.5","type":"version","ui":"1.2"}\n'
        '{"@level":"error","@message":"Error: Error acquiring the state lock","@module":"terraform.ui","@timestamp":"2026-03-10T10:50:18.000000Z",'
        '"diagnostic":{"severity":"error","summary":"Error acquiring the state lock","detail":"Error message: ConditionalCheckFailedException: The conditional request failed"},"type":"diagnostic"}\n'
    )
    version, diagnostic = find_envelopes(text)
    assert (version.failed, diagnostic.failed, diagnostic.codes) == (False, True, ())
    assert diagnostic.messages == ("Error: Error acquiring the state lock", "Error acquiring the state lock",
                                   "Error message: ConditionalCheckFailedException: The conditional request failed")


def test_pino_err_object_and_ecs_flat_error_fields_give_codes() -> None:
    pino = only('{"level":50,"msg":"connect failed","err":{"type":"Error","message":"connect ECONNREFUSED 127.0.0.1:5432","code":"ECONNREFUSED"}}')
    assert codes(pino) == {"err.type": "Error", "err.code": "ECONNREFUSED"}
    # Elastic Common Schema: "log.level", "error.type", "error.message".
    ecs = only('{"@timestamp":"2026-03-10T10:50:17Z","log.level":"error","message":"boom","error.type":"java.lang.NullPointerException","error.message":"x is null"}')
    assert (ecs.failed, codes(ecs)) == (True, {"error.type": "java.lang.NullPointerException"})
    assert ecs.messages == ("boom", "x is null")


# --- the contract ------------------------------------------------------------------------------


def test_envelopes_come_in_order_of_appearance() -> None:
    text = "level=error msg=first\n" + json.dumps({"ok": False, "error": "second"}) + "\n" + S3_NO_SUCH_KEY
    assert [e.shape for e in find_envelopes(text)] == [Shape.LOGFMT, Shape.REST, Shape.AWS_XML]


def test_code_field_rejects_bools_floats_and_an_empty_path() -> None:
    for path, value in (("error.code", True), ("error.code", 1.5), ("", "x")):
        with pytest.raises(ValueError, match="CodeField"):
            CodeField(path, value)  # type: ignore[arg-type]
    assert CodeField("errors.extensions.code", "UNAUTHENTICATED").leaf == "code"


def test_text_that_is_not_a_str_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="must be a str, got bytes"):
        find_envelopes(b'{"error": "x"}')  # type: ignore[arg-type]


def test_lone_surrogates_do_not_raise_and_keep_spans() -> None:
    text = "\udc80 " + json.dumps({"ok": False, "error": "not_authed"})
    envelope = only(text)
    assert (envelope.start, envelope.end) == (2, len(text))


def test_a_long_text_is_read_at_its_head_and_its_tail() -> None:
    filler = "x" * (MAX_SPAN * 3)
    failure = json.dumps({"ok": False, "error": "invalid_auth"})
    text = failure + filler + failure + filler + failure
    found = find_envelopes(text)
    assert [e.start for e in found] == [0, len(text) - len(failure)]


def test_the_last_quarter_keeps_its_share_after_many_successes() -> None:
    lines = [f'{{"level":"info","msg":"tick {i}"}}' for i in range(MAX_ATTEMPTS * 2)]
    text = "\n".join([*lines, '{"level":"fatal","msg":"out of memory"}'])
    assert len(text) < MAX_SPAN
    scan = scan_envelopes(text)
    assert scan.exhausted
    assert scan.envelopes[-1].failed and scan.envelopes[-1].messages == ("out of memory",)


def test_past_the_envelope_cap_failed_envelopes_are_kept_first() -> None:
    lines = ['{"level":"info","msg":"x"}'] * (MAX_ENVELOPES + 10) + ['{"level":"error","msg":"y"}']
    found = find_envelopes("\n".join(lines))
    assert len(found) == MAX_ENVELOPES and found[-1].failed


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises_and_spans_lie_inside_it(text: str) -> None:
    scan = scan_envelopes(text)
    assert scan.attempts <= MAX_ATTEMPTS
    starts = [e.start for e in scan.envelopes]
    assert starts == sorted(starts)
    assert all(0 <= e.start < e.end <= len(text) for e in scan.envelopes)


STRUCTURE_ALPHABET = st.sampled_from(list('{}[]"\':,\\ \n0123456789abcdeflnrstu-.<>/=EoRrC'))


@settings(max_examples=300, deadline=None)
@given(st.text(STRUCTURE_ALPHABET, max_size=400))
def test_bracket_soup_never_raises_and_spans_lie_inside_it(text: str) -> None:
    assert all(0 <= e.start < e.end <= len(text) for e in find_envelopes(text))


@settings(max_examples=200, deadline=None)
@given(prefix=st.text(st.characters(blacklist_characters='{[<"\'\\'), max_size=60),
       code=st.one_of(st.integers(-40000, 40000), st.from_regex(r"[A-Za-z][A-Za-z0-9_.]{0,30}", fullmatch=True)),
       message=st.text(max_size=80), indent=st.sampled_from([None, 2]))
def test_an_error_object_after_any_prefix_is_found_with_its_code(prefix: str, code: int | str, message: str, indent: int | None) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}, indent=indent)
    found = [e for e in find_envelopes(prefix + body) if e.escaped == 0]
    assert len(found) == 1
    envelope = found[0]
    assert (envelope.failed, envelope.start, envelope.end) == (True, len(prefix), len(prefix) + len(body))
    assert CodeField("error.code", code) in envelope.codes


# --- bounded cost: the counters stay under the documented caps (no timing) ---------------------

ADVERSARIAL = {
    "a megabyte of {": "{" * 1_000_000,
    "a megabyte of [": "[" * 1_000_000,
    '{"a": nested 100,000 deep': '{"a":' * 100_000,
    "a megabyte single-line JSON string": json.dumps({"error": {"message": "x" * 1_000_000}}),
    'a megabyte of {"': '{"' * 500_000,
    "a megabyte of {'": "{'" * 500_000,
    'a megabyte of {\\"': '{\\"' * 333_334,
    "a megabyte of [{": "[{" * 500_000,
    "a megabyte of <Error>": "<Error>" * 150_000,
    "100,000 small dict reprs": "{'a': 1} " * 100_000,
    "60,000 logfmt lines": "level=error msg=x\n" * 60_000,
    "60,000 header lines": "x-ms-error-code: Foo\n" * 60_000,
    "30,000 split-looking lines": '[00:00] x {"a": "b\n' * 30_000,
    "a megabyte of backslashes": '{\\' + "\\" * 1_000_000 + '"',
}


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_adversarial_input_stays_under_the_documented_caps(name: str) -> None:
    scan = scan_envelopes(ADVERSARIAL[name])
    assert scan.attempts <= MAX_ATTEMPTS
    assert scan.scanned_chars <= MAX_SCAN_CHARS + 2 * MAX_SPAN
    assert scan.candidates <= MAX_CANDIDATES
    assert len(scan.envelopes) <= MAX_ENVELOPES


def test_the_dict_repr_attempts_have_their_own_cap_and_the_visits_stop_the_rest() -> None:
    scan = scan_envelopes("{'" * 100_000)
    assert scan.exhausted and scan.attempts <= MAX_REPR_ATTEMPTS
    assert scan.candidates == MAX_CANDIDATES


def test_a_success_wrapping_a_whole_failed_response_is_read_inside() -> None:
    # AWS Lambda proxy integration: the gateway's statusCode 200 around the application's body
    # (docs.aws.amazon.com/lambda, "Lambda proxy integrations": statusCode, body as a string)
    text = '{"statusCode": 200, "body": "{\\"ok\\": false, \\"error\\": \\"not_in_channel\\"}"}'
    found = find_envelopes(text)
    assert any(e.failed and ("error", "not_in_channel") in {(c.leaf, c.value) for c in e.codes} for e in found)
    plain = find_envelopes('{"ok": true, "text": "see {the braces} in this message"}')
    assert not any(e.failed for e in plain), "prose with braces in a success is still content"
