"""unstuck.commands.catalogue: the one matcher both command catalogues use.

Expected readings come from getopt(3)/getopt_long(3) (clusters of short flags, a value option
ending a cluster, ``--name=value``, ``--`` ending the options) and from the programs' manuals
for what runs what (find(1) ``-exec``, yarn's and pnpm's "run a package's program")."""

from __future__ import annotations

from unstuck.commands.catalogue import asks_for_help, calls, has_option, read_words, starts_with
from unstuck.commands.credentials import credential_changes
from unstuck.commands.interactive import interactive_call
from unstuck.commands.parse import SimpleCommand, parse_command_line


def only_command(line: str) -> SimpleCommand:
    (command,) = parse_command_line(line).commands
    return command


def test_a_cluster_of_short_flags_is_each_flag_and_a_value_option_ends_it() -> None:
    words = read_words(["-sSk", "-aG", "docker", "bob"], frozenset({"-G"}))
    assert [(o.name, o.value) for o in words.options] == [("-s", None), ("-S", None), ("-k", None),
                                                          ("-a", None), ("-G", "docker")]
    assert words.positionals == ("bob",)
    assert words.positions == (3,)


def test_long_options_take_an_attached_or_next_value_and_double_dash_ends_the_options() -> None:
    words = read_words(["--scopes=a,b", "--hostname", "h", "--", "-x"], frozenset({"--hostname"}))
    assert [(o.name, o.value, o.attached) for o in words.options] == [("--scopes", "a,b", True),
                                                                      ("--hostname", "h", False)]
    assert words.positionals == ("-x",)


def test_an_option_is_bare_alone_or_last_in_its_cluster_and_not_with_a_value_attached() -> None:
    def bare(word: str) -> bool:
        return any(o.name == "-p" and o.bare for o in read_words([word], frozenset()).options)

    assert bare("-p") and bare("-vp")
    assert not bare("-psecret")
    assert not any(o.bare for o in read_words(["--password=x"], frozenset()).options)


def test_an_option_value_is_tested_only_when_the_row_asks() -> None:
    words = read_words(["-o", "BatchMode=yes"], frozenset({"-o"}))
    assert has_option(words, "-o")
    assert has_option(words, "-o", lambda value: value == "BatchMode=yes")
    assert not has_option(words, "-o", lambda value: value == "BatchMode=no")
    assert not has_option(words, "-o", before=0)


def test_help_is_asked_by_a_help_word_or_a_lone_h_where_h_means_help() -> None:
    assert asks_for_help(read_words(["auth", "--help"], frozenset()), h_means_help=False)
    assert asks_for_help(read_words(["-h"], frozenset()), h_means_help=True)
    assert not asks_for_help(read_words(["-h"], frozenset()), h_means_help=False)
    # -h inside a cluster is that cluster's flag, not a request for help (chmod -Rh, ls -lh)
    assert not asks_for_help(read_words(["-lh"], frozenset()), h_means_help=True)


def test_subcommand_words_are_the_first_positionals_each_a_set_of_alternatives() -> None:
    words = read_words(["-R", "o/r", "pr", "merge"], frozenset({"-R"}))
    assert starts_with(words, [{"pr"}, {"merge", "close"}])
    assert not starts_with(words, [{"merge"}])


def test_the_calls_of_a_command_are_its_wrappers_its_program_and_what_it_runs_from_its_arguments() -> None:
    found = [(c.program, c.args, c.wraps) for c in calls(only_command("sudo -u bob yarn heroku auth:token"))]
    assert found == [("sudo", ("-u", "bob"), True), ("yarn", ("heroku", "auth:token"), False),
                     ("heroku", ("auth:token",), False)]


def test_the_command_of_find_exec_is_a_call_with_its_own_wrappers() -> None:
    found = [(c.program, c.wraps) for c in calls(only_command("find . -name x -exec sudo chmod 777 {} ;"))]
    assert found == [("find", False), ("sudo", True), ("chmod", False)]


def test_a_package_managers_own_command_runs_no_program() -> None:
    assert [c.program for c in calls(only_command("pnpm install heroku"))] == ["pnpm"]


def test_both_catalogues_see_the_program_a_package_manager_runs() -> None:
    # heroku-auth-token: "Heroku CLI Commands, heroku auth:token: outputs current CLI
    # authentication token"; yarn runs a locally installed package's program (yarnpkg.com/cli/run)
    assert [c.name for c in credential_changes("yarn heroku auth:token")] == ["heroku-auth-token"]
    assert [c.name for c in credential_changes("pnpm exec heroku auth:token")] == ["heroku-auth-token"]
    waiting = interactive_call("yarn wrangler login", terminal=False)
    assert waiting is not None and waiting.program == "wrangler"
