"""The failure bank: its file format, its checks, and the bundled bank's contents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unstuck.core.situations import Kind
from unstuck.faults.bank import (
    FAMILY_KINDS,
    BankError,
    Channel,
    FailureBank,
    Family,
    family_of,
    load_bank,
    parse_form,
)
from unstuck.recognise.classify import classify_result

GOOD = {
    "id": "gh-logged-out", "family": "auth_permission", "kind": "auth", "tools": ["gh"], "channel": "exit",
    "transient": False, "interactive": True, "exit_code": 4,
    "output": "To get started with GitHub CLI, please run:  gh auth login",
    "provenance": {"source": "harvest", "reference": "gh repo view cli/cli", "version": "gh version 2.23.0"},
}


def write_lines(path: Path, *rows: object) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def test_every_family_holds_the_kinds_design_maps_onto_it() -> None:
    # DESIGN.md: unavailable server -> unavailable, authentication or permission -> auth/permission, ...
    assert family_of(Kind.UNAVAILABLE) is Family.UNAVAILABLE_SERVER
    assert family_of(Kind.AUTH) is family_of(Kind.PERMISSION) is Family.AUTH_PERMISSION
    assert family_of(Kind.TIMEOUT) is Family.TIMEOUT
    assert family_of(Kind.NOT_FOUND) is Family.MISSING_RESOURCE
    assert family_of(Kind.INVALID_ARGS) is Family.INVALID_ARGUMENTS
    assert family_of(Kind.EXECUTION_ERROR) is Family.EXECUTION_EXCEPTION
    assert family_of(Kind.QUOTA) is Family.RATE_LIMIT
    assert family_of(Kind.NETWORK) is Family.NETWORK
    assert len(Family) == 8


def test_kinds_that_are_not_failures_of_a_call_have_no_family() -> None:
    for kind in (Kind.EMPTY, Kind.TRUNCATED, Kind.INJECTED_INSTRUCTION):
        assert family_of(kind) is None
    filed = {kind for kinds in FAMILY_KINDS.values() for kind in kinds}
    assert filed == set(Kind) - {Kind.EMPTY, Kind.TRUNCATED, Kind.INJECTED_INSTRUCTION}


def test_a_good_line_round_trips_through_the_file(tmp_path: Path) -> None:
    bank = load_bank(write_lines(tmp_path / "bank.jsonl", GOOD, ""))
    assert len(bank) == 1
    form = bank[0]
    assert (form.family, form.kind, form.channel, form.exit_code) == (Family.AUTH_PERMISSION, Kind.AUTH, Channel.EXIT, 4)
    FailureBank(bank).write(tmp_path / "again.jsonl")
    assert json.loads((tmp_path / "again.jsonl").read_text()) == GOOD


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"family": "gremlins"}, "'family' is 'gremlins'"),
        ({"kind": "quota"}, "not in family 'auth_permission'"),
        ({"channel": "pigeon"}, "'channel'"),
        ({"exit_code": None}, "needs field 'exit_code'"),
        ({"exit_code": True}, "'exit_code' must be int"),
        ({"tools": []}, "'tools'"),
        ({"transient": "no"}, "'transient' must be bool"),
        ({"provenance": {"source": "rumour", "reference": "x"}}, "provenance source 'rumour'"),
        ({"headers": [["only-a-name"]]}, "'headers'"),
        ({"exit_code": 4, "retries": 3}, "unknown field(s) retries"),
        ({"channel": "http", "http_status": 200}, "http_status 200 is not an error status"),
    ],
)
def test_a_malformed_line_names_the_file_the_line_and_the_field(tmp_path: Path, change: dict, named: str) -> None:
    path = write_lines(tmp_path / "bank.jsonl", GOOD, {**GOOD, "id": "second", **change})
    with pytest.raises(BankError) as caught:
        load_bank(path)
    message = str(caught.value)
    assert f"{path}:2" in message and "(second)" in message and named in message


def test_a_line_that_is_not_json_names_its_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "bank.jsonl", GOOD, "{not json")
    with pytest.raises(BankError, match=r"bank\.jsonl:2: not JSON"):
        load_bank(path)


def test_duplicate_ids_are_refused_naming_both_lines(tmp_path: Path) -> None:
    with pytest.raises(BankError, match=r"bank\.jsonl:2: duplicate failure form id 'gh-logged-out' \(first on line 1\)"):
        load_bank(write_lines(tmp_path / "bank.jsonl", GOOD, GOOD))


def test_an_http_form_renders_as_the_response_the_tool_would_return() -> None:
    form = parse_form("t", {
        "id": "api-429", "family": "rate_limit", "kind": "quota", "tools": ["http"], "channel": "http",
        "transient": True, "http_status": 429, "headers": [["Retry-After", "30"]], "output": '{"message": "slow down"}',
        "provenance": {"source": "report", "reference": "c000"},
    })
    result = form.to_result("web_search")
    assert (result.ok, result.http_status, result.header("retry-after"), result.injected) == (False, 429, "30", "api-429")
    assert result.content == 'HTTP 429\n{"message": "slow down"}'


def test_exception_and_mcp_forms_render_as_failed_results() -> None:
    base = {"family": "missing_resource", "kind": "not_found", "tools": ["python"], "transient": False,
            "provenance": {"source": "harvest", "reference": "open()"}}
    raised = parse_form("t", {**base, "id": "e", "channel": "exception", "exception_type": "FileNotFoundError",
                              "output": "[Errno 2] No such file or directory: 'x'"}).to_result("read_file")
    assert (raised.ok, raised.error_type) == (False, "FileNotFoundError")
    assert raised.content == "FileNotFoundError: [Errno 2] No such file or directory: 'x'"
    mcp = parse_form("t", {**base, "id": "m", "channel": "mcp", "output": "Error: no such page"}).to_result("fetch")
    assert (mcp.ok, mcp.content) == (False, "Error: no such page")


# -- the bundled bank -----------------------------------------------------------------------------

BUNDLED = load_bank()


def test_the_bundled_bank_covers_all_eight_families_from_harvests_and_reports() -> None:
    assert set(BUNDLED.families()) == set(Family)
    sources = {form.provenance.source for form in BUNDLED}
    assert sources == {"harvest", "report"}


@pytest.mark.parametrize("program", ["gh", "git", "pip", "docker", "kubectl", "psql", "redis-cli", "curl", "sqlite3"])
def test_the_bundled_bank_holds_harvested_forms_of_each_named_program(program: str) -> None:
    assert any(program in form.tools and form.provenance.source == "harvest" for form in BUNDLED)


def test_harvested_python_exceptions_are_the_ones_the_issue_names() -> None:
    types = {form.exception_type for form in BUNDLED if form.channel is Channel.EXCEPTION}
    assert {"PermissionError", "FileNotFoundError", "UnicodeDecodeError", "TimeoutError",
            "ConnectionRefusedError"} <= types


def test_report_forms_cite_the_case_and_its_report() -> None:
    reports = [form for form in BUNDLED if form.provenance.source == "report"]
    assert reports
    for form in reports:
        case_id = form.id.removeprefix("case-")
        assert form.provenance.reference.startswith(f"{case_id}: ") and len(form.provenance.reference) > len(case_id) + 2


@pytest.mark.parametrize("form", [f for f in BUNDLED if f.provenance.source == "harvest"], ids=lambda f: f.id)
def test_each_harvested_form_classifies_as_the_kind_of_the_state_that_produced_it(form) -> None:  # type: ignore[no-untyped-def]
    tool = form.tools[0]
    situation = classify_result(tool, {}, form.to_result(tool))
    assert situation is not None and situation.kind is form.kind, form.output


def test_writing_the_bank_never_writes_through_a_link_at_a_temporary_name(tmp_path: Path) -> None:
    # the name the writer used before ("NAME.partial") planted as a link to a file elsewhere
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("keep\n")
    target = tmp_path / "bank.jsonl"
    (tmp_path / "bank.jsonl.partial").symlink_to(victim)
    FailureBank(load_bank(write_lines(tmp_path / "source.jsonl", GOOD, ""))).write(target)
    assert victim.read_text() == "keep\n"
    assert json.loads(target.read_text()) == GOOD
