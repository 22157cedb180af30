from __future__ import annotations

import json

import pytest

from unstuck.core.situations import Kind
from unstuck.core.tools import (
    TRUNCATION_MARKER,
    CommandOutput,
    Effect,
    HttpResponse,
    ToolResult,
    normalize_result,
    truncate_content,
)
from unstuck.toolkit.specs import Toolset, tool


def test_string_and_none_are_successes() -> None:
    assert normalize_result("t", "hello") == ToolResult("t", True, "hello")
    assert normalize_result("t", None) == ToolResult("t", True, "")


def test_command_output_fails_on_nonzero_exit_and_keeps_both_streams() -> None:
    result = normalize_result("run", CommandOutput("gh repo view", 4, "", "please run:  gh auth login\n"))
    assert not result.ok
    assert result.exit_code == 4
    assert "please run:  gh auth login" in result.content
    assert "(exit code 4)" in result.content
    assert normalize_result("run", CommandOutput("true", 0, "fine\n")).ok


def test_http_response_succeeds_only_on_2xx_and_3xx() -> None:
    ok = normalize_result("api", HttpResponse(200, "{}"))
    bad = normalize_result("api", HttpResponse(401, '{"message": "Bad credentials"}', (("Retry-After", "5"),)))
    assert ok.ok and ok.http_status == 200
    assert not bad.ok and bad.http_status == 401
    assert bad.header("retry-after") == "5"


def test_exception_becomes_a_failed_result_with_its_type() -> None:
    result = normalize_result("read_file", FileNotFoundError(2, "No such file or directory", "x.md"))
    assert not result.ok
    assert result.error_type == "FileNotFoundError"
    assert result.content.startswith("FileNotFoundError: [Errno 2] No such file or directory")


def test_mapping_with_declared_situation_is_validated() -> None:
    raw = {"status": "error", "situation": {"kind": "auth", "subject": "gh", "unblock": "gh auth login"}}
    result = normalize_result("check_cli_setup", raw)
    assert not result.ok
    assert result.declared is not None and result.declared.unblock == "gh auth login"
    assert json.loads(result.content)["status"] == "error"


def test_mapping_with_malformed_situation_raises_naming_the_tool() -> None:
    with pytest.raises(ValueError, match="'check_cli_setup'.*unknown kind 'offline'"):
        normalize_result("check_cli_setup", {"status": "error", "situation": {"kind": "offline", "subject": "gh"}})


def test_mapping_status_decides_success_then_exit_code_then_error_key() -> None:
    assert normalize_result("t", {"status": "success"}).ok
    assert not normalize_result("t", {"status": "error"}).ok
    assert not normalize_result("t", {"exit_code": 2}).ok
    assert not normalize_result("t", {"error": "boom"}).ok
    assert normalize_result("t", {"rows": []}).ok


def test_not_executed_mapping_is_a_refusal() -> None:
    result = normalize_result("shell", {"executed": False, "tier": "REFUSE", "status": "success"})
    assert not result.executed and not result.ok


def test_decorator_records_policy_facts_and_builds_a_schema() -> None:
    @tool(interactive=True, effect="write", subject="gh")
    def sign_in(name: str, timeout_s: float = 45.0) -> str:
        """Sign in."""
        return name

    assert sign_in.interactive and sign_in.effect is Effect.WRITE
    assert sign_in.subject_of({}) == "gh"
    assert sign_in.description == "Sign in."
    assert sign_in.parameters == {
        "type": "object",
        "properties": {"name": {"type": "string"}, "timeout_s": {"type": "number"}},
        "required": ["name"],
    }


def test_invoke_turns_a_raising_tool_into_a_failed_result() -> None:
    @tool
    def explode() -> str:
        raise RuntimeError("boom")

    result = explode.invoke({})
    assert not result.ok and result.error_type == "RuntimeError" and "boom" in result.content


def test_invoke_with_wrong_arguments_is_a_type_error_result() -> None:
    @tool
    def echo(text: str) -> str:
        return text

    result = echo.invoke({"txt": "x"})
    assert not result.ok and result.error_type == "TypeError"


def test_subject_defaults_to_the_tool_name() -> None:
    @tool
    def read_config() -> str:
        return ""

    assert read_config.subject_of({}) == "read_config"


def test_toolset_rejects_two_tools_with_one_name() -> None:
    @tool(name="same")
    def a() -> None: ...

    @tool(name="same")
    def b() -> None: ...

    with pytest.raises(ValueError, match="two tools are named 'same'"):
        Toolset([a, b])


def test_truncation_keeps_head_and_tail_and_marks_the_cut() -> None:
    text = "A" * 1000 + "B" * 1000
    cut = truncate_content(text, limit_bytes=200)
    assert cut.startswith("A" * 100) and cut.endswith("B" * 100)
    assert TRUNCATION_MARKER in cut and "1800 bytes omitted" in cut
    assert truncate_content("short", limit_bytes=200) == "short"


def test_declared_kind_survives_normalisation_of_a_ready_result() -> None:
    from unstuck.core.situations import Situation

    ready = ToolResult("t", False, "x", declared=Situation(Kind.QUOTA, "api"))
    assert normalize_result("t", ready) is ready


def test_http_response_accepts_a_header_mapping() -> None:
    response = HttpResponse(429, "slow down", {"Retry-After": "7"})  # type: ignore[arg-type]
    assert response.headers == (("Retry-After", "7"),) and response.header("retry-after") == "7"


def test_command_output_with_fields_in_the_wrong_order_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="exit_code must be an int"):
        CommandOutput(0, "all good", "")  # type: ignore[arg-type]


def test_exception_whose_message_cannot_be_printed_is_still_a_result() -> None:
    class NastyError(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    result = normalize_result("t", NastyError())
    assert not result.ok and result.error_type == "NastyError" and "unprintable" in result.content


def test_repeated_call_ids_in_one_reply_are_told_apart() -> None:
    from unstuck.core.tools import ToolCall, unique_call_ids

    calls = (ToolCall.of("x", "a"), ToolCall.of("x", "b"), ToolCall.of("y", "c"), ToolCall.of("x", "d"))
    assert [c.id for c in unique_call_ids(calls)] == ["x", "x#2", "y", "x#3"]
    assert [c.tool for c in unique_call_ids(calls)] == ["a", "b", "c", "d"]
