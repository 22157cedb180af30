"""The non-interactive form of a command whose program waited for input at its deadline: from
the interactive-call catalogue first, then the table of programs that wait, then no stdin."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from unstuck.commands.interactive import InteractiveCatalogue, load_interactive_catalogue, parse_interactive_calls
from unstuck.commands.waiting import FIXES, non_interactive_fix


def test_a_pager_started_by_git_is_replaced_by_git_pager_cat() -> None:
    # git(1): GIT_PAGER "set to an empty string or to the value cat, Git will not launch a pager"
    fix = non_interactive_fix("less", "git log")
    assert fix.command == "GIT_PAGER=cat git log" and fix.program == "less"
    assert fix.source.startswith("git(1)")
    assert fix.describe().startswith("less waited for input at the deadline (")
    assert "run it so it does not wait: GIT_PAGER=cat git log (git(1)" in fix.describe()


def test_a_setting_for_one_command_of_a_longer_line_is_exported_before_it() -> None:
    assert non_interactive_fix("less", "cd repo && git log").command == "export GIT_PAGER=cat; cd repo && git log"


def test_man_and_systemctl_get_their_own_pager_settings() -> None:
    assert non_interactive_fix("less", "man ls").command == "MANPAGER=cat man ls"  # man(1)
    assert non_interactive_fix("less", "systemctl status ssh").command == "SYSTEMD_PAGER=cat systemctl status ssh"


def test_a_pager_the_line_runs_itself_gets_its_output_piped_into_cat() -> None:
    assert non_interactive_fix("less", "seq 1 500 | less").command == "seq 1 500 | less | cat"
    assert non_interactive_fix("less", "seq 1 500 | less && echo done").command == \
        "{ seq 1 500 | less && echo done; } | cat"


def test_a_pager_a_program_outside_the_catalogue_started_is_replaced_by_pager_cat() -> None:
    assert non_interactive_fix("less", "psql -c 'select 1'").command == "PAGER=cat psql -c 'select 1'"  # environ(7)


def test_a_prompt_of_the_program_itself_is_answered_by_its_own_option() -> None:
    # apt-get(8): -y, --yes, --assume-yes; the catalogue row is apt-get's even under sudo
    assert non_interactive_fix("apt-get", "apt-get install gh").command == "apt-get install gh, with --yes"
    assert non_interactive_fix("apt-get", "sudo apt-get install gh").command == "sudo apt-get install gh, with --yes"
    assert non_interactive_fix("sudo", "sudo ls /root").command == "sudo ls /root, with --non-interactive"
    assert non_interactive_fix("ssh", "ssh host ls").command == "ssh host ls, with -o BatchMode=yes"


def test_an_editor_git_started_is_avoided_with_the_message_option() -> None:
    assert non_interactive_fix("vi", "git commit").command == "git commit, with --message <message>"


def test_a_program_a_script_runs_is_named_with_its_option() -> None:
    fix = non_interactive_fix("apt-get", "bash setup.sh")
    assert fix.command == "give apt-get -y where bash setup.sh runs it"
    assert fix.source.startswith("apt-get(8)")


def test_an_unknown_prompt_is_given_no_terminal_to_read() -> None:
    assert non_interactive_fix("python3", "python3 -c 'input()'").command == "python3 -c 'input()' < /dev/null"
    assert non_interactive_fix("python3", "cd x && python3 ask.py").command == "{ cd x && python3 ask.py; } < /dev/null"


def test_without_a_command_line_the_fix_is_said_as_what_to_change() -> None:
    assert non_interactive_fix("less", None).command == "set PAGER=cat for the command"
    assert non_interactive_fix("python3", None).command.startswith("give it no terminal to read")


def test_a_users_own_catalogue_row_decides_first() -> None:
    mine = parse_interactive_calls(
        "calls:\n  - program: mytool\n    unless_env: [MYTOOL_PAGER=cat]\n    terminal_streams: [stdout]\n"
        "    waits: with_terminal\n    why: mytool pages its report\n    source: mytool(1) MYTOOL_PAGER\n", "mine.yaml")
    catalogue = InteractiveCatalogue((*mine, *load_interactive_catalogue().rows))
    fix = non_interactive_fix("less", "mytool report", catalogue=catalogue)
    assert (fix.command, fix.why, fix.source) == ("MYTOOL_PAGER=cat mytool report", "mytool pages its report",
                                                  "mytool(1) MYTOOL_PAGER")


def test_every_table_row_names_its_source() -> None:
    assert all(row.source and row.why and row.programs for row in FIXES)


@settings(max_examples=200, deadline=None)
@given(program=st.text(max_size=20), command=st.one_of(st.none(), st.text(max_size=200)))
def test_any_text_gets_a_fix_and_never_raises(program: str, command: str | None) -> None:
    fix = non_interactive_fix(program, command)
    assert fix.command and fix.source and fix.why


def test_an_editor_git_opens_on_a_continued_rebase_is_avoided_with_git_editor_true() -> None:
    # git sequencer.c commit_staged_changes(): --continue commits the resolution with the editor;
    # git-var(1): GIT_EDITOR comes before core.editor, so only the variable is sure to win
    fix = non_interactive_fix("vi", "git add README.md && git rebase --continue")
    assert fix.command == "export GIT_EDITOR=true; git add README.md && git rebase --continue"
    assert fix.source.startswith("git sequencer.c")


def test_pnpms_purge_prompt_is_avoided_with_its_confirm_modules_purge_setting() -> None:
    # pnpm pkg-manager/core/src/install/validateModules.ts: no prompt when confirmModulesPurge is false
    fix = non_interactive_fix("pnpm", "pnpm install")
    assert fix.command == "pnpm install, with --config.confirmModulesPurge=false"
    assert "validateModules.ts" in fix.source


def test_an_option_the_manual_puts_before_the_subcommand_is_put_there_in_an_exact_command_line() -> None:
    # git(1): git [-P | --no-pager] <command>: the option comes before the subcommand
    assert non_interactive_fix("git", "git log --oneline").command == "git --no-pager log --oneline"
    assert non_interactive_fix("git", "cd repo && git log").command == "cd repo && git --no-pager log"
    assert non_interactive_fix("git", "/usr/bin/git log").command == "/usr/bin/git --no-pager log"


def test_an_option_before_the_subcommand_under_a_wrapper_is_said_as_what_to_change() -> None:
    fix = non_interactive_fix("git", "sudo git log")
    assert fix.command == "sudo git log, with --no-pager (before the subcommand)"
