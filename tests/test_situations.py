from __future__ import annotations

import pytest

from unstuck.core.situations import Kind, KindClass, Probe, Situation, Source, validate_situation


def test_declared_mapping_becomes_a_situation_with_probe_and_unblock() -> None:
    value = {
        "kind": "auth", "subject": "gh", "interactive": True, "unblock": "gh auth login",
        "probe": {"tool": "check_cli_setup", "args": {"name": "gh"}},
    }
    situation = validate_situation("check_cli_setup", value)
    assert situation == Situation(
        Kind.AUTH, "gh", interactive=True, unblock="gh auth login",
        probe=Probe.of("check_cli_setup", {"name": "gh"}), source=Source.DECLARED,
    )
    assert situation.probe is not None and situation.probe.arguments == {"name": "gh"}


def test_none_means_no_situation() -> None:
    assert validate_situation("any_tool", None) is None


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"kind": "logged_out", "subject": "gh"}, "unknown kind 'logged_out'"),
        ({"kind": "auth"}, "missing subject"),
        ({"kind": "auth", "subject": "   "}, "missing subject"),
        ({"kind": "auth", "subject": "gh", "source": "inferred", "unblock": "gh auth login"}, "inferred situation carries an unblock"),
        ({"kind": "auth", "subject": "gh", "source": "inferred", "probe": "check_cli_setup"}, "inferred situation carries a probe"),
        ({"kind": "auth", "subject": "gh", "colour": "red"}, "unknown field(s) colour"),
        ({"kind": "auth", "subject": "gh", "retry_after_s": "soon"}, "retry_after_s must be a number"),
        ({"kind": "auth", "subject": "gh", "interactive": "yes"}, "interactive must be true or false"),
        ({"kind": "auth", "subject": "gh", "probe": {"args": {}}}, "probe has no 'tool' name"),
        (["auth", "gh"], "expected a mapping or Situation"),
    ],
)
def test_malformed_declaration_raises_value_error_naming_the_tool(value: object, problem: str) -> None:
    with pytest.raises(ValueError) as caught:
        validate_situation("check_cli_setup", value)
    assert "'check_cli_setup'" in str(caught.value)
    assert problem in str(caught.value)


def test_inferred_situation_object_with_unblock_is_rejected() -> None:
    bad = Situation(Kind.AUTH, "gh", unblock="gh auth login", source=Source.INFERRED)
    with pytest.raises(ValueError, match="'run_command'.*unblock"):
        validate_situation("run_command", bad)


def test_quota_is_a_blocker_unless_retryable_then_transient() -> None:
    assert Situation(Kind.QUOTA, "api").kind_class is KindClass.BLOCKER
    assert Situation(Kind.QUOTA, "api", retryable=True).kind_class is KindClass.TRANSIENT


@pytest.mark.parametrize(
    ("kind", "klass"),
    [
        (Kind.AUTH, KindClass.BLOCKER), (Kind.PERMISSION, KindClass.BLOCKER),
        (Kind.NOT_INSTALLED, KindClass.BLOCKER), (Kind.TIMEOUT, KindClass.TRANSIENT),
        (Kind.UNAVAILABLE, KindClass.TRANSIENT), (Kind.NETWORK, KindClass.TRANSIENT),
        (Kind.NOT_FOUND, KindClass.SELF_FIXABLE), (Kind.INVALID_ARGS, KindClass.SELF_FIXABLE),
        (Kind.CONFLICT, KindClass.SELF_FIXABLE), (Kind.EXECUTION_ERROR, KindClass.SELF_FIXABLE),
        (Kind.EMPTY, KindClass.DEGENERATE), (Kind.TRUNCATED, KindClass.DEGENERATE),
        (Kind.INJECTED_INSTRUCTION, KindClass.ADVERSARIAL),
    ],
)
def test_every_kind_has_the_class_design_md_gives_it(kind: Kind, klass: KindClass) -> None:
    assert Situation(kind, "s").kind_class is klass


def test_to_dict_round_trips_through_validation() -> None:
    original = Situation(Kind.PERMISSION, "gh", interactive=True, unblock="gh auth refresh -s read:org",
                         probe=Probe.of("check_cli_setup", {"name": "gh"}), detail="missing scope")
    assert validate_situation("t", original.to_dict()) == original


def test_situation_object_with_a_plain_string_kind_is_read_as_the_kind() -> None:
    loose = Situation("auth", "gh")  # type: ignore[arg-type]
    checked = validate_situation("t", loose)
    assert checked is not None and checked.kind is Kind.AUTH


def test_situation_object_with_an_unknown_kind_raises_naming_the_tool() -> None:
    with pytest.raises(ValueError, match="'t'.*unknown kind 'offline'"):
        validate_situation("t", Situation("offline", "gh"))  # type: ignore[arg-type]


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), -1.0])
def test_retry_after_must_be_a_finite_non_negative_number(seconds: float) -> None:
    with pytest.raises(ValueError, match="'t'.*retry_after_s"):
        validate_situation("t", {"kind": "quota", "subject": "api", "retryable": True, "retry_after_s": seconds})
