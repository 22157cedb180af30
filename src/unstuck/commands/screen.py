"""The command screen: whether a command line is safe for unstuck to quote, as a suggested
command ("please run: …", :func:`screen_command`, its text cleaned first by
:func:`unstuck.core.text.clean_terminal_text`) or inside prose (:func:`find_download_and_run`:
a download run as code).
Internal: not a supported import path (docs/reference/index.md lists those that are).

The line is read by :func:`unstuck.commands.parse.parse_command_line`. A command name that is
an expansion the line does not resolve (a substitution as a command name, or any program named
by a variable fed a pipe) is refused: its value exists only once it has run. The programs it
knows are data, each row with its source: interpreters in ``unstuck/data/interpreters.yaml``,
the calls that print a credential in ``unstuck/data/credential_changes.yaml`` (rows marked
``prints``), and the programs that fetch, send, resolve names, dump the environment, copy files,
run their input or the working tree's code in ``unstuck/data/command_screen.yaml``
(:mod:`unstuck.commands.programs`).

Regular expressions here compile under google-re2 (linear time on hostile text), each on first
use (:class:`unstuck.core.regex.LazyRegex`: a process that screens one command reads a few).
"""


from __future__ import annotations

import functools
import posixpath
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import re2

from unstuck.commands.catalogue import positional_indexes
from unstuck.commands.parse import (
    PLAIN_WORD,
    SHELLS,
    SUB_WRAPPERS,
    CommandLine,
    SimpleCommand,
    Stream,
    base_name,
    leading_options,
    option_value,
    parse_command_line,
    reads_stdin_as_script,
    shell_script,
    word_set,
)
from unstuck.commands.programs import Does, does, program_table, program_word, row_doing
from unstuck.core.regex import LazyRegex
from unstuck.core.text import clean_terminal_text, has_invisible

__all__ = [
    "TOO_MANY_TO_SCREEN",
    "Screened",
    "find_download_and_run",
    "home_path",
    "screen_command",
    "written_files",
]

#: The screen refuses a suggested command longer than this many characters.
SCREEN_MAX_CHARS = 300

# ---------------------------------------------------------------------------------------------
# terminal text and the screen for suggested commands
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Screened:
    """The screen's verdict: ``command`` (cleaned) when it passed, else ``refused`` (one phrase)."""

    command: str | None
    refused: str | None


#: Programs that run a program text they are given are the rows of ``unstuck/data/interpreters.yaml``
#: (:func:`unstuck.commands.interpreters.interpreter_options`, each row with its source): the
#: options their text follows, and the options that take a value. Without inline code or a
#: script operand (or with ``-``) they read their program from standard input.
_PYTHON = LazyRegex(r"^python[0-9.]*$")
_EVALUATORS = frozenset({"eval", "iex", "invoke-expression"})
_SOURCING = frozenset({"source", "."})
#: awk(1) (POSIX; gawk, mawk): its program is the first operand or the file of ``-f``; it runs
#: commands with ``system()``, ``print | "cmd"``, ``"cmd" | getline`` and ``|&`` (gawk coprocess).
_AWKS = frozenset({"awk", "gawk", "mawk", "nawk", "original-awk"})
_AWK_VALUES = frozenset({"-f", "--file", "-v", "--assign", "-F", "--field-separator", "-e", "--source", "-i",
                         "--include", "-l", "--load", "-E", "--exec"})
_AWK_RUNS = LazyRegex(r"system\s*\(|\|\s*&|\|\s*getline|(?:print|printf)\b[^;}]*\|")
#: sed(1) (GNU): the ``e`` command runs the pattern space (or its argument) as a command, and the
#: ``e`` flag of ``s///`` runs the result of the substitution.
_SEDS = frozenset({"sed", "gsed"})
#: Its options that take the next word as their value: ``-e script``, ``-f script-file``.
_SED_VALUES = frozenset({"-e", "--expression", "-f", "--file"})
_SED_EXEC = LazyRegex(
    r"(?:^|[;{}\n\s0-9$/])e(?:[\s;}]|$)|"
    + "|".join(r"s{d}(?:[^{d}\\]|\\.)*{d}(?:[^{d}\\]|\\.)*{d}[gpiImM0-9w]*e".format(d=re2.escape(d))
               for d in "/|#:,@!%"))
#: Wrappers that run their command as root (sudo(8), doas(1), pkexec(1), run0(1), su(1)), and the
#: writers that, run so, write what they read to any file (tee(1), dd(1) ``of=``).
_ROOT_WRAPPERS = frozenset({"sudo", "doas", "pkexec", "run0", "su"})
_ROOT_WRITERS = frozenset({"tee", "dd"})
#: Variable names that hold secrets: the components and substrings credentials are named with
#: (``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD``, ``GITHUB_PAT``,
#: ``SLACK_WEBHOOK_URL``, ``DATABASE_URL`` with its password, ``NPM_AUTH``…); ``PATH``,
#: ``PWD``, ``USER``, ``HOME`` are not.
_SECRET_NAME = LazyRegex(
    r"(?i)token|secret|passw(?:or)?d|credential|webhook|api_?key|private_?key|access_?key|cookie|"
    r"connection_?string|(?:^|_)(?:keys?|pat|auth|pass|pw|creds|dsn|sas)(?:_|$)|keys?$|(?:^|_)(?:database|db)_ur[li]$")
_VARIABLE_REFERENCE = LazyRegex(r"\$\{?#?([A-Za-z_][A-Za-z0-9_]*)")
_SECRET_HEADER = LazyRegex(r"(?i)(?:^|\s)(?:proxy-)?(?:authorization|cookie|x-api-key|private-token|"
                             r"x-auth-token|api-key)\s*:")
#: Credential stores named by their programs' manuals: ssh(1) FILES (~/.ssh), the AWS CLI
#: credentials file and SSO cache, netrc(5), shadow(5), git-credential-store(1), gh's
#: hosts.yml and hub's config, docker login's config.json, kubectl's kubeconfig, npmrc(5),
#: .pypirc, .yarnrc.yml (npmAuthToken), gpg(1) ~/.gnupg, dotenv files (.env, .env.*, direnv's
#: .envrc), proc(5) /proc/PID/environ, gcloud's ~/.config/gcloud, the Azure CLI's ~/.azure,
#: curl(1)'s ~/.curlrc (headers and -u in a config file), Vault's ~/.vault-token, libpq's
#: ~/.pgpass, MySQL's ~/.my.cnf, Terraform's credentials.tfrc.json, Cargo's credentials(.toml),
#: RubyGems' ~/.gem/credentials, rclone.conf, pass(1)'s ~/.password-store.
_SECRET_PATH = LazyRegex(
    r"(?:^|[\s=@:'\"/])\.ssh(?:/|[\s'\"]|$)|\.aws/(?:credentials|sso/cache|cli/cache)|(?:^|[\s=@:'\"/])[._]netrc\b|"
    r"/etc/(?:g?shadow|sudoers|master\.passwd)\b|\.git-credentials|\.config/gh/hosts\.yml|\.config/hub\b|"
    r"\.docker/config\.json|\.kube/config\b|\.npmrc|\.pypirc|\.yarnrc\.yml|\.gnupg(?:/|\b)|"
    r"\bid_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?(?:[^.A-Za-z0-9_]|$)|"
    r"(?:^|[\s=@:'\"/<])\.env(?:rc|\.[A-Za-z0-9_.-]+)?(?:[\s'\"]|$)|/proc/[^/\s]+/environ|"
    r"\.config/gcloud(?:/|\b)|(?:^|/)\.azure(?:/|\b)|\.curlrc|\.vault-token|\.pgpass|\.my\.cnf|"
    r"\.terraform\.d/credentials|\.cargo/credentials|\.gem/credentials|rclone\.conf|\.password-store")
#: PowerShell is not bash: ``iex``/``Invoke-Expression`` anywhere in a suggested command is
#: refused outright, whatever the bash grammar made of the line around it.
_POWERSHELL_EVAL = LazyRegex(r"(?i)(?:^|[^a-z0-9_-])(?:iex|invoke-expression)(?:[^a-z0-9_-]|$)")
#: Inline code that evaluates text as code (Python ``exec``/``eval``, JavaScript ``eval``,
#: ``Function``, ``vm.runIn…Context``, Ruby ``instance_eval``…, Lua ``loadstring``), also when
#: passed as a function (``.then(eval)``).
_CODE_EVAL = LazyRegex(
    r"(?:^|[^A-Za-z0-9_.$])(?:eval|exec|execScript|Function|instance_eval|class_eval|module_eval|loadstring|"
    r"dostring|runInThisContext|runInNewContext|runInContext)\s*[(),;]|new\s+Function\b")
#: Inline code that talks to the network (a URL, or a standard library's HTTP or socket API).
_CODE_NETWORK = LazyRegex(
    r"(?i)https?://|urlopen|urllib|requests\.|http\.client|httpx|aiohttp|socket|fetch\s*\(|xmlhttprequest|"
    r"https?\.(?:get|request)|net::http|open-uri|uri\.open|lwp|io::socket|curl_|file_get_contents\s*\(\s*['\"]https?|"
    r"invoke-webrequest|invoke-restmethod|webclient|fsockopen|net\.connect|dns\.")
#: Inline code that runs commands.
_CODE_RUNS = LazyRegex(r"system\s*\(|popen|subprocess|child_process|spawn|execsync|execfile|os\.exec|"
                         r"runtime\.getruntime|process\.start|shell_exec|passthru|proc_open|`")
#: Inline code that reads the environment.
_CODE_ENVIRONMENT = LazyRegex(r"os\.environ|getenv|process\.env|\bENV\[|\$ENV\{|%ENV|Deno\.env|Bun\.env|"
                                r"\$env:|/proc/self/environ")
#: Directories only the system's package manager writes: a program there was not just fetched.
_SYSTEM_DIRS = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/etc/")
#: A package, requirement or module given by address instead of by registry name: a URL (also
#: PEP 508 ``name @ URL`` and pip's ``git+https://``), an scp-style ``git@host:``, npm's
#: ``github:``/``gitlab:``/``bitbucket:``/``gist:`` and ``git:`` shortcuts.
_URL_SPEC = LazyRegex(r"^(?:git\+|hg\+|svn\+|bzr\+)?[A-Za-z][A-Za-z0-9+.-]*://|^git@|"
                        r"^(?:github|gitlab|bitbucket|gist|git):|@\s*(?:git\+)?[A-Za-z][A-Za-z0-9+.-]*://")
#: npm-install(1): ``<githubname>/<githubrepo>[#<commit-ish>]`` installs from GitHub.
_GITHUB_SHORTHAND = LazyRegex(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+(?:#\S*)?$")
#: A remote operand of scp(1)/rsync(1): ``[user@]host:path`` (rsync also ``rsync://``).
_REMOTE_OPERAND = LazyRegex(r"^(?:[^@/\s:]+@)?[A-Za-z0-9][A-Za-z0-9_.-]*:|^rsync://")
#: pip(1) options whose value is an index or a local setting, not a requirement.
_PIP_VALUES = frozenset({"-i", "--index-url", "--extra-index-url", "--proxy", "--cert", "--client-cert",
                         "--trusted-host", "-c", "--constraint", "--target", "-t", "--prefix", "--root",
                         "--python", "--platform", "--python-version", "--implementation", "--abi", "--log",
                         "--cache-dir", "--src", "--upgrade-strategy", "--progress-bar", "--root-user-action"})

@dataclass(frozen=True, slots=True)
class _Interpreter:
    inline: frozenset[str]
    values: frozenset[str]


_NO_OPTIONS = _Interpreter(frozenset(), frozenset())


@functools.lru_cache(maxsize=256)
def _interpreter_named(name: str) -> _Interpreter | None:
    # imported here: the interpreter table loads only when a line names a program
    from unstuck.commands.interpreters import interpreter_options

    spec = interpreter_options(name)
    return None if spec is None or spec.program_operand else _Interpreter(spec.inline, spec.values)


def _interpreter(program: str | None) -> _Interpreter | None:
    """The interpreter table's row for ``program`` (any case; ``python3.12`` is ``python``), or
    ``None``; awk, whose program is its operand, is read by :func:`_awk_runs_input` instead."""
    if program is None:
        return None
    name = program.lower()
    return _interpreter_named("python" if _PYTHON.match(name) else name)


def _inline_code(spec: _Interpreter, args: Sequence[str]) -> str | None:
    for index, word in enumerate(args):
        if word == "--":
            return None
        lowered = word.lower()
        if lowered in spec.inline:
            return args[index + 1] if index + 1 < len(args) else ""
        if len(word) > 2 and word[0] == "-" and word[1] != "-" and "-" + word[1] in spec.inline and \
                lowered not in spec.values:
            return word[2:]
    return None


def _operand(spec: _Interpreter, args: Sequence[str]) -> str | None:
    """The script operand (first non-option word), if any."""
    index = leading_options(args, spec.values, signs="-+", fold_case=True).operand
    return args[index] if index < len(args) else None


def _reads_program_from_stdin(command: SimpleCommand, spec: _Interpreter) -> bool:
    if command.program is not None and command.program.lower() in ("iex", "invoke-expression"):
        return True
    if command.program in SHELLS or command.program in ("csh", "tcsh"):
        return reads_stdin_as_script(command.program, command.args)
    if _inline_code(spec, command.args) is not None:
        return False
    operand = _operand(spec, command.args)
    return operand is None or operand in ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")


def _positional_words(args: Sequence[str], values: frozenset[str]) -> list[str]:
    return [args[i] for i in positional_indexes(args, values)]


def _option_in(args: Sequence[str], options: frozenset[str]) -> bool:
    for word in args:
        if word == "--":
            return False
        if word in options or word.split("=", 1)[0] in options:
            return True
    return False


# --- fetched code reaching an interpreter -----------------------------------------------------


def _awk_runs_input(command: SimpleCommand) -> bool:
    """awk reading its program from a pipe (``-f -``), or whose program runs commands."""
    read = leading_options(command.args, _AWK_VALUES)
    program_text: str | None = None
    for option, value in read.options:
        if option in ("-f", "--file", "-E", "--exec") and value is not None:
            if value in ("-", "/dev/stdin"):
                return True
            program_text = ""
        if option in ("-e", "--source") and value is not None:
            program_text = (program_text or "") + value
    if program_text is None and read.operand < len(command.args):
        program_text = command.args[read.operand]
    return bool(program_text and _AWK_RUNS.search(program_text))


def _sed_runs_input(command: SimpleCommand) -> bool:
    read = leading_options(command.args, _SED_VALUES)
    scripts: list[str] = []
    for option, value in read.options:
        if option in ("-e", "--expression") and value is not None:
            scripts.append(value)
        elif option.startswith("--expression="):
            scripts.append(option.split("=", 1)[1])
        elif option in ("-f", "--file") and value is not None:
            if value in ("-", "/dev/stdin"):
                return True
            scripts.append("")
    if not scripts and read.operand < len(command.args):
        scripts.append(command.args[read.operand])
    return any(_SED_EXEC.search(script) for script in scripts)


def _replace_string(wrapper: tuple[str, ...]) -> str | None:
    """The replace-string of ``xargs -I R``/``-i``/``--replace`` (``{}`` by default) or GNU
    parallel (``{}`` unless ``-I R``)."""
    name = base_name(wrapper[0])
    for index, word in enumerate(wrapper[1:], start=1):
        if word == "-I" and index + 1 < len(wrapper):
            return wrapper[index + 1]
        if word.startswith("-I") and len(word) > 2:
            return word[2:]
        if word in ("-i", "--replace") or word.startswith("--replace="):
            return word.split("=", 1)[1] if "=" in word else "{}"
    return "{}" if name == "parallel" else None


def _runs_its_input_as_code(command: SimpleCommand) -> str | None:
    """xargs/parallel feeding piped text to an interpreter as its code, or as the command."""
    if command.stdin is not Stream.PIPE:
        return None
    feeders = [w for w in command.wrappers if base_name(w[0]) in ("xargs", "parallel")]
    if not feeders:
        if command.program == "parallel" and all(a.startswith("-") for a in command.args):
            return "runs another command's output as commands"
        return None
    replace_with = _replace_string(feeders[-1])
    if replace_with and program_word(command) == replace_with:
        return "runs another command's output as commands"
    spec = _interpreter(command.program)
    if spec is None:
        return None
    code = _inline_code(spec, command.args)
    if code is None or not code.strip() or (replace_with is not None and replace_with in code):
        return "runs another command's output as code"
    return None


def _fetches(command: SimpleCommand) -> bool:
    """Whether the command brings files or code from the network (the rows of the program
    table that fetch: a downloader, a clone, a cloud storage copy; scp/rsync from a remote
    source operand; sftp given a host and path)."""
    if does(command, Does.FETCHES):
        return True
    operands = [a for a in command.args if not a.startswith("-")]
    if does(command, Does.FETCHES_REMOTE_SOURCE) and any(_REMOTE_OPERAND.match(a) for a in operands[:-1]):
        return True
    return bool(operands) and does(command, Does.FETCHES_GIVEN_OPERAND)


def _python_module(args: Sequence[str]) -> str | None:
    for index, word in enumerate(args):
        if word == "-m":
            return args[index + 1] if index + 1 < len(args) else ""
        if word.startswith("-m") and len(word) > 2:
            return word[2:]
        if word == "-c" or not word.startswith("-"):
            return None
    return None


def _runs_local_code(command: SimpleCommand) -> bool:
    """Whether the command runs a file or the working tree (which a download may have written)."""
    word = program_word(command)
    if "/" in word and not word.startswith(_SYSTEM_DIRS):
        return True
    program = command.program
    spec = _interpreter(program)
    if program in _SOURCING:
        return _operand(_NO_OPTIONS, command.args) is not None
    if spec is not None:
        if _PYTHON.match((program or "").lower()) or (program or "").lower().startswith("pypy"):
            module = _python_module(command.args)
            if module is not None:  # ``-m`` with no module runs nothing
                return bool(module) and module not in program_table().data_modules
        if _inline_code(spec, command.args) is None:
            operand = _operand(spec, command.args)
            if operand is not None and operand not in ("-", "/dev/stdin"):
                return True
    if program in ("pip", "pip3") and _positional_words(command.args, _PIP_VALUES)[:1] == ["install"]:
        return any(a in (".", "..", "-e", "--editable", "-r", "--requirement") or a.startswith(("./", "../", "/"))
                   for a in command.args)
    return does(command, Does.RUNS_WORKING_TREE)


def _package_by_url(command: SimpleCommand) -> bool:
    """A package runner or installer given a package by URL or repository address."""
    node_runners = {"npx", "pnpx", "bunx"}
    program = command.program or ""
    for wrapper in command.wrappers:
        name = base_name(wrapper[0])
        runner = name in node_runners or name in ("uvx", "pipx") or (
            len(wrapper) > 1 and (name, wrapper[1]) in SUB_WRAPPERS and SUB_WRAPPERS[(name, wrapper[1])].package)
        if not runner:
            continue
        node = name in node_runners or name in ("npm", "pnpm", "yarn", "bun")
        candidates = [*wrapper[1:], program_word(command)]
        if any(_URL_SPEC.search(w.split("=", 1)[1] if w.startswith("--") and "=" in w else w) for w in candidates):
            return True
        if node and any(_GITHUB_SHORTHAND.match(w) for w in candidates if not w.startswith("-")):
            return True
    args = command.args
    if _PYTHON.match(program.lower()) and _python_module(args) == "pip":
        program, args = "pip", tuple(args[args.index("pip") + 1:]) if "pip" in args else ()
    words = _positional_words(args, _PIP_VALUES if program in ("pip", "pip3", "uv", "pipx") else frozenset())
    if not words:
        return False
    first = words[0]
    rest = words[1:]
    installs = (program in ("pip", "pip3") and first == "install") or (
        program == "pipx" and first in ("install", "run", "inject")) or (
        program == "uv" and (words[:2] in (["pip", "install"], ["tool", "install"], ["tool", "run"])
                             or first in ("add", "run")))
    if installs:
        return any(_URL_SPEC.search(w) for w in rest) or any(
            _URL_SPEC.search(w.split("=", 1)[-1]) for w in args if w.startswith(("--from", "--with")))
    if program in ("npm", "yarn", "pnpm", "bun") and first in ("install", "i", "add", "dlx", "x", "exec", "create",
                                                               "init"):
        return any(_URL_SPEC.search(w) or _GITHUB_SHORTHAND.match(w) for w in rest)
    if program == "deno" and first in ("run", "install", "compile", "x"):
        return any("://" in w for w in rest) or any("://" in w for w in args if not w.startswith("-"))
    if program == "cargo" and first == "install":
        return _option_in(args, frozenset({"--git"})) or any("://" in w for w in rest)
    if program == "go" and first == "run":
        return any("@" in w and "/" in w and "." in w.split("/", 1)[0] for w in rest)
    return False


def _gives_container_the_host(command: SimpleCommand) -> bool:
    """``docker run`` with the host's root or the container engine's socket mounted, privileged, or
    in the host's process namespace (docker-run(1) --privileged, --pid=host, -v, --mount)."""
    if not does(command, Does.STARTS_CONTAINER):
        return False
    sockets = ("/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock")
    args = command.args
    for index, word in enumerate(args):
        if word == "--privileged" or word in ("--pid=host", "--userns=host") or (
                word == "--pid" and index + 1 < len(args) and args[index + 1] == "host"):
            return True
        value: str | None = None
        if word in ("-v", "--volume", "--mount") and index + 1 < len(args):
            value = args[index + 1]
        elif word.startswith(("--volume=", "--mount=")):
            value = word.split("=", 1)[1]
        elif word.startswith("-v") and len(word) > 2 and not word.startswith("--"):
            value = word[2:]
        if value is None:
            continue
        source = value.split(":", 1)[0]
        for part in value.split(","):
            key, _, found = part.partition("=")
            if key in ("source", "src"):
                source = found
        if (source.startswith("/") and source.rstrip("/") == "") or source in sockets:
            return True
    return False


# --- programs that run their standard input, and files that run or grant access later ------------

#: sudo(8) options after which sudo, given no command, runs a shell that reads its commands from
#: standard input: ``-i``/``--login`` (the target user's login shell) and ``-s``/``--shell``
#: (``$SHELL``); the short options that take a value end a cluster (``-iu root`` is ``-i -u root``).
_SUDO_SHELL_LETTERS = frozenset("is")
_SUDO_SHELL_LONGS = frozenset({"--login", "--shell"})
_SUDO_VALUE_LETTERS = "ugCDhpRrtTU"
#: su(1) and runuser(1) options that take a value; without ``-c``/``--command``/
#: ``--session-command`` they start the user's shell, which reads standard input; runuser's
#: ``-u USER COMMAND…`` runs the command directly.
_SU_VALUES = frozenset({"-c", "--command", "--session-command", "-g", "--group", "-G", "--supp-group", "-s",
                        "--shell", "-w", "--whitelist-environment", "-u", "--user"})
_SU_COMMANDS = frozenset({"-c", "--command", "--session-command"})
#: at(1): ``at TIME`` and batch(1) read the commands to run later from standard input unless
#: ``-f FILE`` names them, and ``-l``/``-r``/``-d``/``-c``/``-q``-only calls (atq, atrm, cat) run none.
_AT_NOT_STDIN = frozenset({"-f", "-l", "-r", "-d", "-c", "-V"})
#: crontab(1): ``crontab -`` (or no file operand) installs standard input as the user's crontab;
#: ``-l``/``-r``/``-e``/``-i`` list, remove or edit instead. Options that take a value: ``-u``.
_CRONTAB_NOT_STDIN = frozenset({"-l", "-r", "-e", "-i", "-V", "-T"})
#: ssh(1): options that take a value (SYNOPSIS); the words after the destination are a command
#: run by the remote user's shell, and with none the remote shell reads standard input.
_SSH_VALUES = frozenset({"-B", "-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o",
                         "-p", "-Q", "-R", "-S", "-W", "-w"})
#: docker-exec(1), podman-exec(1), nerdctl exec: options that take a value; then the container,
#: then the command run in it (its standard input is the caller's with ``-i``).
_EXEC_VALUES = frozenset({"-e", "--env", "--env-file", "-u", "--user", "-w", "--workdir", "--detach-keys",
                          "--preserve-fds", "--preserve-fd"})
_CONTAINER_ENGINES = frozenset({"docker", "podman", "nerdctl"})
#: docker-run(1)/podman-run(1): options that take a value; then the image, then the command
#: run in the container (``-i`` keeps the caller's standard input attached).
_RUN_VALUES = word_set("-a --attach --add-host --cap-add --cap-drop --cgroupns --cidfile --cpus -c --cpu-shares "
                   "--cpuset-cpus --device --dns --entrypoint -e --env --env-file --expose --gpus -h --hostname "
                   "--ip --label -l --log-driver --log-opt -m --memory --mount --name --network --net "
                   "--network-alias -p --publish --pid --platform --pull --restart --runtime --security-opt "
                   "--shm-size --stop-signal --stop-timeout --tmpfs -u --user --ulimit --userns -v --volume "
                   "--volumes-from -w --workdir --ipc --uts --health-cmd --isolation --memory-swap")
#: kubectl exec (kubectl reference): options that take a value (with kubectl's global ones);
#: ``kubectl exec POD -- COMMAND…``.
_KUBECTL_EXEC_VALUES = word_set("-c --container -f --filename --pod-running-timeout -n --namespace --context --cluster "
                            "--user --kubeconfig -s --server --token")


def _inner_command(words: Sequence[str], command: SimpleCommand) -> SimpleCommand | None:
    """``words`` (a command another program runs for ``command``) as a simple command with
    ``command``'s standard input; ``None`` when they do not parse as one."""
    if not words:
        return None
    parsed = parse_command_line(" ".join(_quote(w) for w in words))
    if not parsed.commands:
        return None
    return replace(parsed.commands[0], stdin=command.stdin, redirects=command.redirects)


def _quote(word: str) -> str:
    return word if PLAIN_WORD.match(word) else "'" + word.replace("'", "'\\''") + "'"


def _remote_or_delegated(command: SimpleCommand) -> SimpleCommand | bool | None:
    """The command a privilege wrapper, remote shell or container executor runs for ``command``
    (``None`` when it runs none), or ``True`` when it runs a shell on its standard input."""
    program, args = command.program, command.args
    if program == "env":  # env(1) -S/--split-string: the string is split into the command and its words
        split = option_value(args, "-S", ("--split-string",))
        return None if split is None else _inner_command(split.split(), command)
    if program in ("su", "runuser"):
        if _option_in(args, _SU_COMMANDS):
            return None  # su -c STRING: the string is parsed as the script of the line
        if program == "runuser" and _option_in(args, frozenset({"-u", "--user"})):
            return _inner_command(args[leading_options(args, _SU_VALUES).operand:], command)
        operands = [a for a in args[leading_options(args, _SU_VALUES).operand:] if a != "-"]
        return True if len(operands) <= 1 else _inner_command(["sh", *operands[1:]], command)
    if program == "sudo":  # a shell option and no command (a command would have been resolved)
        for word in args:
            if word in _SUDO_SHELL_LONGS:
                return True
            if len(word) > 1 and word[0] == "-" and word[1] != "-":
                for letter in word[1:]:
                    if letter in _SUDO_SHELL_LETTERS:
                        return True
                    if letter in _SUDO_VALUE_LETTERS:
                        break
        return None
    if program == "ssh":
        index = leading_options(args, _SSH_VALUES).operand
        if index >= len(args):
            return None
        rest = args[index + 1:]
        return True if not rest else _inner_command(_words_of(" ".join(rest)), command)
    if program in _CONTAINER_ENGINES and args[:1] in (("exec",), ("run",)):
        index = leading_options(args[1:], _EXEC_VALUES if args[0] == "exec" else _RUN_VALUES).operand + 1
        return _inner_command(args[index + 1:], command) if index < len(args) else None
    if program == "kubectl" and ("exec" in args[:3] or "run" in args[:3]):
        if "--" in args:
            return _inner_command(args[args.index("--") + 1:], command)
        if "run" in args[:3]:
            return None  # kubectl run NAME --image=… without ``--`` runs the image's own command
        start = args.index("exec") + 1
        index = leading_options(args[start:], _KUBECTL_EXEC_VALUES).operand + start
        return _inner_command(args[index + 1:], command) if index < len(args) else None
    return None


def _words_of(text: str) -> list[str]:
    parsed = parse_command_line(text)
    return list(parsed.commands[0].words) if parsed.commands else []


def _runs_stdin_as_code(command: SimpleCommand, depth: int = 0) -> bool:
    """Whether ``command`` runs what it reads on standard input as code, now or later: an
    interpreter reading its program there (through any wrapper), sudo ``-i``/``-s``, su/runuser
    without a command, ``env -S 'bash'``, ssh/docker exec/podman exec/kubectl exec running such
    a command (or, ssh, none: the remote shell reads it), at(1)/batch(1), ``crontab -``."""
    program = command.program
    if program is None or depth > 3:
        return False
    if program in ("at", "batch"):
        return not _option_in(command.args, _AT_NOT_STDIN) and (program == "batch" or bool(command.args))
    if program == "crontab":
        index = leading_options(command.args, frozenset({"-u"})).operand
        operand = command.args[index] if index < len(command.args) else "-"
        return not _option_in(command.args, _CRONTAB_NOT_STDIN) and operand == "-"
    spec = _interpreter(program)
    if spec is not None:
        return _reads_program_from_stdin(command, spec)
    if command.wrappers and base_name(command.wrappers[-1][0]) == "sudo" and not command.args:
        cluster = command.wrappers[-1][-1]  # ``sudo -iu root``: the word read as the program is -u's value
        if len(cluster) > 2 and cluster[0] == "-" and cluster[1] != "-" and cluster[-1] in _SUDO_VALUE_LETTERS:
            return bool(set(cluster[1:-1]) & _SUDO_SHELL_LETTERS)
    inner = _remote_or_delegated(command)
    if inner is True:
        return True
    return isinstance(inner, SimpleCommand) and _runs_stdin_as_code(inner, depth + 1)


#: Files whose content the system or a login runs, or that grant access, by their programs'
#: manuals: bash(1) INVOCATION (~/.bash_profile, ~/.bash_login, ~/.profile, ~/.bashrc,
#: ~/.bash_logout, /etc/profile, /etc/bash.bashrc), zsh(1) STARTUP/SHUTDOWN FILES (.zshenv,
#: .zprofile, .zshrc, .zlogin, .zlogout, /etc/zsh/), /etc/profile.d/, fish(1) config.fish and
#: conf.d, ksh(1) ~/.kshrc, tcsh(1) ~/.cshrc/~/.tcshrc/~/.login, ~/.xprofile, ~/.xinitrc,
#: environment.d(5), ~/.pam_environment (pam_env(8)), PowerShell's ``$PROFILE`` scripts
#: (about_Profiles: profile.ps1, Microsoft.PowerShell_profile.ps1).
STARTUP_FILE = LazyRegex(
    r"(?:^|/|~)\.(?:bash_profile|bash_login|profile|bashrc|bash_logout|zshenv|zprofile|zshrc|zlogin|zlogout|kshrc|"
    r"mkshrc|cshrc|tcshrc|login|xprofile|xinitrc|xsession|pam_environment)$|^/etc/(?:profile|bash\.bashrc|"
    r"bashrc|zshrc|zsh/|profile\.d/|environment)|fish/(?:config\.fish|conf\.d/)|environment\.d/|"
    r"(?i:^\$profile\b|_?profile\.ps1$)")
#: Files that grant access or run code for others, so any write to them is refused: sshd(8)
#: AUTHORIZED_KEYS FILE FORMAT (~/.ssh/authorized_keys, authorized_keys2) and SSHRC (~/.ssh/rc,
#: /etc/ssh/sshrc), ssh_config(5) (~/.ssh/config: ProxyCommand, LocalCommand), crontab(5)
#: (/etc/crontab, /etc/cron.d/, /etc/cron.hourly…, /var/spool/cron/), sudoers(5)
#: (/etc/sudoers, /etc/sudoers.d/), ld.so(8) /etc/ld.so.preload, passwd(5)/shadow(5),
#: systemd.unit(5) unit directories (/etc/systemd/, ~/.config/systemd/user/), githooks(5)
#: (.git/hooks/), /etc/rc.local, udev(7) rules (/etc/udev/rules.d/).
TRUST_FILE = LazyRegex(
    r"\.ssh/(?:authorized_keys2?|rc|config)$|^/etc/ssh/(?:sshrc|sshd_config)|^/etc/(?:crontab|cron\.[a-z]+/|"
    r"sudoers|ld\.so\.preload|passwd|g?shadow|rc\.local|systemd/|udev/rules\.d/)|^/var/spool/cron/|"
    r"\.config/systemd/user/|(?:^|/)\.git/hooks/|(?:^|/)authorized_keys2?$")
_USER_HOME = LazyRegex(r"^(?:~[A-Za-z0-9_.-]*|\$HOME|\$\{HOME\})(/|$)")


def home_path(path: str) -> str:
    """``~/x``, ``$HOME/x``, ``~user/x`` read as ``~/x`` (the patterns above are relative to a home)."""
    return str(_USER_HOME.sub(r"~\1", path))


def written_files(command: SimpleCommand) -> list[str]:
    """The files a command writes: its output redirections, a downloader's output file (curl
    ``-O``: the URL's last segment), tee(1)'s operands, dd(1) ``of=``, cp(1)/mv(1)/install(1)/
    ln(1)'s last operand."""
    files = [r.target for r in command.redirects
             if r.operator in (">", ">>", ">|", "&>", "&>>") and r.descriptor in (None, 1)]
    program = (command.program or "").lower()
    args = command.args
    outputs = program_table().outputs
    output = outputs.get(command.program or "") or outputs.get(program)
    if output is not None:  # the program table's output options, each row with its source
        short = output.short
        value = option_value([a.lower() for a in args] if output.ignore_case else args, short, output.long)
        if value is None and short is not None:  # a cluster ending in the option: curl -fsSLo FILE
            value = next((args[i + 1] for i, a in enumerate(args[:-1]) if len(a) > 2 and a[0] == "-"
                          and a[1] != "-" and a.endswith(short[1])), None)
        if value is not None:
            files.append(value)
        letters = {o[1] for o in output.remote_name if len(o) == 2}
        if (output.url_named and value is None) or any(a in output.remote_name or (
                a.startswith("-") and not a.startswith("--") and letters & set(a[1:])) for a in args):
            files.extend(posixpath.basename(a.rstrip("/")) for a in args if "://" in a)
    elif program == "tee":
        files.extend(a for a in args if not a.startswith("-"))
    elif program == "dd":
        files.extend(a[3:] for a in args if a.startswith("of="))
    elif program in ("cp", "mv", "install", "ln"):
        operands = [a for a in args if not a.startswith("-")]
        files.extend(operands[-1:] if len(operands) > 1 else [])
    return [home_path(f) for f in files if f]


#: Installers that run a package file's maintainer scripts or install its code (dpkg(1) ``-i``,
#: rpm(8) ``-i``/``-U``/``-F``, apt(8)/apt-get(8)/dnf(8)/yum(8)/zypper(8) ``install`` of a
#: file path, pip ``install`` of an archive or wheel file, npm-install(1) of a tarball, gem(1)
#: ``install`` of a .gem, snap(8) ``install --dangerous``, flatpak(1) ``install`` of a bundle,
#: installer(8) ``-pkg``, pacman(8) ``-U``).
_PACKAGE_FILE = LazyRegex(r"\.(?:deb|rpm|whl|tgz|tar\.gz|tar\.bz2|zip|gem|snap|flatpak|flatpakref|pkg|apk|"
                            r"pkg\.tar\.zst|pkg\.tar\.xz|appimage|run|bin|sh)$")


def _installs_package_file(command: SimpleCommand) -> bool:
    """A package installer given a package file (a path, or a name ending as a package file)."""
    program, args = command.program or "", command.args
    operands = [a for a in args if not a.startswith("-")]
    files = [a for a in operands if "/" in a or _PACKAGE_FILE.search(a.lower())]
    if program == "dpkg":
        return _option_in(args, frozenset({"-i", "--install", "--unpack"})) and bool(operands)
    if program == "rpm":
        return any(a.startswith("-") and not a.startswith("--") and set(a[1:]) & set("iUF") for a in args) or \
            _option_in(args, frozenset({"--install", "--upgrade", "--freshen"}))
    if program == "pacman":
        return _option_in(args, frozenset({"-U", "--upgrade"}))
    if program == "installer":
        return _option_in(args, frozenset({"-pkg", "-package"}))
    if program in ("apt", "apt-get", "dnf", "yum", "zypper", "pip", "pip3", "npm", "pnpm", "yarn", "gem", "snap",
                   "flatpak", "pipx", "uv") or _PYTHON.match(program.lower()):
        return any(w in ("install", "add", "localinstall", "in") for w in operands[:2]) and bool(
            [f for f in files if f not in operands[:1]])
    return False


def _is_output_of_command(word: str) -> bool:
    """A word that stands for another command's output: ``<(…)``, ``$(…)``, backticks, or a
    descriptor path (``/dev/fd/N``, ``/proc/self/fd/N``, ``/dev/stdin``)."""
    return word.startswith(("<(", "/dev/fd/", "/proc/self/fd/", "/dev/stdin")) or "$(" in word or "`" in word


def _fetched_variables(line: CommandLine) -> frozenset[str]:
    """Variables the line sets to a download's output (``x=$(curl …)``, ``export x="$(wget -qO- …)"``)."""
    names = set()
    for name, value in line.assignments:
        if "$(" in value or "`" in value:
            inner = parse_command_line(value.strip('"'))
            if any(_fetches(c) for c in inner.commands):
                names.add(name)
    return frozenset(names)


def _runs_variable(command: SimpleCommand, names: frozenset[str]) -> bool:
    """Whether ``command`` runs one of the variables ``names`` as code: as its program's name,
    an interpreter's inline code or script operand, or a sourced file."""
    def uses(word: str | None) -> bool:
        return word is not None and any(n in names for n in _VARIABLE_REFERENCE.findall(word))
    if command.program is None and command.words and uses(command.words[0]):
        return True
    spec = _interpreter(command.program)
    if spec is not None and (uses(_inline_code(spec, command.args)) or uses(shell_script(command.args))):
        return True
    return (spec is not None or command.program in _SOURCING) and uses(
        _operand(spec or _NO_OPTIONS, command.args))


def _echoes_download(command: SimpleCommand) -> bool:
    """echo(1)/printf(1) printing a command line that downloads and runs (``echo 'curl … | sh' |
    at now``): what it prints is the script of the program it is piped into."""
    if command.program not in ("echo", "printf") or not command.args:
        return False
    text = " ".join(a for a in command.args if not a.startswith("-"))
    parsed = parse_command_line(text.replace("\\n", "\n").split("\n")[0])
    return bool(parsed.commands) and _download_refusal(parsed, text) is not None


def _persists_download(line: CommandLine, command: SimpleCommand) -> str | None:
    """A download written (by the fetch itself, or by tee/dd/a redirection downstream of it in
    a pipe) to a shell start-up file or a file that grants access (:data:`STARTUP_FILE`,
    :data:`TRUST_FILE`)."""
    fed = _fetches(command) or (command.stdin is Stream.PIPE and any(
        c.stage < command.stage and _fetches(c) for c in line.pipelines[command.pipeline]))
    if not fed:
        return None
    for path in written_files(command):
        if TRUST_FILE.search(path):
            return "writes downloaded content to a file that grants access or runs commands"
        if STARTUP_FILE.search(path):
            return "writes downloaded content to a shell start-up file"
    return None


#: Why a command whose name is a substitution is refused: it runs another command's output.
_RUNS_OUTPUT = "runs the output of another command as a command"


def _code_span_in_prose(line: CommandLine, refusal: str) -> bool:
    """Whether a reading of prose was refused only because a word in backticks or ``$(…)``
    that fetches nothing stands where a command's name goes. In a README the line
    "(`man x` or `git help x` if git is" opens with Markdown code spans (CommonMark 0.31,
    section 6.1), not with a command that runs what ``man x`` prints; a substitution in that
    place that fetches ("`curl -s https://…` and") still counts."""
    return refusal == _RUNS_OUTPUT and all(
        _may_fetch().search(program_word(command)) is None
        for command in line.commands if command.program is None and command.words)


def _download_refusal(line: CommandLine, text: str) -> str | None:
    """Fetched or generated text reaching an interpreter, and code run after a download."""
    if _POWERSHELL_EVAL.search(text):
        return "runs text as a command (Invoke-Expression)"
    fetched = False
    fetched_files: set[str] = set()
    fetched_variables = _fetched_variables(line)
    for command in line.commands:
        program = command.program
        lowered = (program or "").lower()
        name_word = program_word(command)
        if lowered in _EVALUATORS:
            return "runs text as a command (eval)"
        if fetched_variables and _runs_variable(command, fetched_variables):
            return "runs fetched text as code"
        if program is None and command.words:
            if "$(" in name_word or "`" in name_word or name_word.startswith("<("):
                return _RUNS_OUTPUT
            if command.stdin is Stream.PIPE:
                return "pipes another command's output into a program named by a variable"
        spec = _interpreter(program)
        if spec is not None:
            code = _inline_code(spec, command.args)
            if lowered in ("pwsh", "powershell", "pwsh.exe", "powershell.exe") and any(
                    w.lower() in ("-encodedcommand", "-enc", "-ec", "-e") for w in command.args):
                return "runs an encoded command"
            if code is not None and program not in SHELLS and (
                    "$(" in code or "`" in code or _CODE_EVAL.search(code)
                    or (_CODE_NETWORK.search(code) and _CODE_RUNS.search(code))):
                return "runs fetched or generated text as code"
            if _reads_program_from_stdin(command, spec):
                if command.stdin is Stream.PIPE:
                    return "pipes another command's output into an interpreter"
                if any(r.operator == "<" and r.descriptor in (None, 0) and _is_output_of_command(r.target)
                       for r in command.redirects):  # bash < <(curl …): a process substitution as stdin
                    return "feeds another command's output to an interpreter"
                if command.stdin is Stream.TEXT and any(
                        "$(" in r.target or "`" in r.target for r in command.redirects if r.operator == "<<<"):
                    return "feeds another command's output to an interpreter"
        if spec is not None or program in _SOURCING:
            operand = _operand(spec or _NO_OPTIONS, command.args)
            if operand is not None and (operand.startswith("<(") or operand.startswith("/dev/fd/")
                                        or operand.startswith("/proc/self/fd/")
                                        or (operand == "/dev/stdin" and command.stdin is Stream.PIPE)):
                return "runs another command's output as a program"
            if operand is not None and ("$(" in operand or "`" in operand):
                return "runs another command's output as a program"
        if command.stdin is Stream.PIPE and (
                (lowered in _AWKS and _awk_runs_input(command)) or (lowered in _SEDS and _sed_runs_input(command))):
            return "pipes another command's output into a program that runs it"
        fed = _runs_its_input_as_code(command)
        if fed is not None:
            return fed
        # (only in a complete line: a cut quotation can hide the remote or delegated command)
        if command.stdin is Stream.PIPE and spec is None and line.complete and _runs_stdin_as_code(command):
            upstream = [c for c in line.pipelines[command.pipeline] if c.stage < command.stage]
            if program in ("sudo", "su", "runuser", "env") or any(_fetches(c) or _echoes_download(c)
                                                                   for c in upstream):
                return "pipes another command's output into a program that runs it"
        persisted = _persists_download(line, command)
        if persisted is not None:
            return persisted
        if command.stdin is Stream.PIPE and does(command, Does.RUNS_ITS_INPUT) and any(
                c.stage < command.stage and _fetches(c) for c in line.pipelines[command.pipeline]):
            return "pipes fetched content into a program that runs it"
        if _package_by_url(command):
            return "runs a package fetched by URL"
        if _gives_container_the_host(command):
            return "gives a container the host"
        if fetched and (_runs_local_code(command) or _installs_package_file(command)
                        or name_word in fetched_files or base_name(name_word) in fetched_files):
            return "runs code it downloads"
        if _fetches(command):
            fetched = True
            written = written_files(command)
            fetched_files.update(written)
            fetched_files.update(base_name(f) for f in written)
    for pipeline in line.pipelines:
        for command in pipeline:
            if command.program in _ROOT_WRITERS and any(base_name(w[0]) in _ROOT_WRAPPERS for w in command.wrappers) \
                    and any(c.stage < command.stage and _fetches(c) for c in pipeline):
                return "writes downloaded content as root"
    return None


# --- secrets reaching the network -------------------------------------------------------------


def _secret_variable(name: str) -> bool:
    return name not in ("PWD", "OLDPWD") and bool(_SECRET_NAME.search(name))


def _prints_secret(command: SimpleCommand) -> bool:
    """A command whose output is a credential or the environment."""
    program = command.program
    args = command.args
    dump = row_doing(command, Does.DUMPS_ENVIRONMENT)
    if dump is not None and (not args or all(a.startswith("-") for a in args)):
        return not dump.only_with_letters or any(letter in a for a in args for letter in dump.only_with_letters)
    if program == "printenv":
        return any(_secret_variable(a) for a in args if not a.startswith("-"))
    # the rows of unstuck/data/credential_changes.yaml marked prints, each with its source
    from unstuck.commands.credentials import prints_credential  # the catalogue loads when first needed

    return prints_credential(command) is not None


def _inline_sink(command: SimpleCommand) -> str | None:
    """The inline code of an interpreter that talks to the network."""
    spec = _interpreter(command.program)
    if spec is None or command.program in SHELLS:
        return None
    code = _inline_code(spec, command.args)
    return code if code is not None and _CODE_NETWORK.search(code) else None


def _is_sink(command: SimpleCommand) -> bool:
    """Whether the command sends data off the machine."""
    return does(command, Does.SENDS) or does(command, Does.RESOLVES) or _inline_sink(command) is not None


def _sent_words(command: SimpleCommand) -> Iterator[str]:
    """The words a network command sends or names (credential-file option values left out)."""
    credential_options = program_table().credential_options.get(command.program or "", frozenset())
    skip_next = False
    for word in command.args:
        if skip_next:
            skip_next = False
            continue
        if word in credential_options:
            skip_next = True
            continue
        if any(word.startswith(o + "=") if o.startswith("--") else (word.startswith(o) and len(word) > 2)
               for o in credential_options):
            continue
        yield word
    for redirect in command.redirects:
        if redirect.operator in ("<<<", "<<", "<<-") and redirect.descriptor in (None, 0):
            yield redirect.target


def _sends_credential_file(command: SimpleCommand) -> bool:
    """curl(1) reading request headers from a file (``-H @file``) or its options from a config
    file (``-K file``): where curl keeps an Authorization header or ``-u user:password``; a
    container given a host variable by name (``docker run -e GITHUB_TOKEN``, docker-run(1)
    --env: "the value is taken from the environment")."""
    args = command.args
    if command.program in ("curl", "curlie"):
        for index, word in enumerate(args):
            following = args[index + 1] if index + 1 < len(args) else ""
            if word in ("-H", "--header") and following.startswith("@"):
                return True
            if word.startswith(("-H@", "--header=@")):
                return True
            if word in ("-K", "--config") or (word.startswith("-K") and len(word) > 2) or word.startswith("--config="):
                return True
        return False
    if does(command, Does.STARTS_CONTAINER):
        for index, word in enumerate(args):
            value: str | None = None
            if word in ("-e", "--env") and index + 1 < len(args):
                value = args[index + 1]
            elif word.startswith("--env="):
                value = word.split("=", 1)[1]
            elif word.startswith("-e") and len(word) > 2 and not word.startswith("--"):
                value = word[2:]
            if value is not None and "=" not in value and _secret_variable(value):
                return True
    return False


class _Secrets:
    """What carries a secret in one line: variables, files written with one, command outputs."""

    def __init__(self, line: CommandLine) -> None:
        self.line = line
        self.variables: set[str] = set()
        self.files: set[str] = set()
        count = len(line.commands)
        self.output = [False] * count
        self.hosted: list[list[int]] = [[] for _ in range(count)]
        self.members: dict[int, list[int]] = {}
        for index, command in enumerate(line.commands):
            if command.host is not None and 0 <= command.host < count:
                self.hosted[command.host].append(index)
            self.members.setdefault(command.pipeline, []).append(index)
        self._settle()

    def text(self, text: str) -> bool:
        """Whether a word or value names a secret: a secret-looking or tainted variable, a
        credential header, a credential file, a file the line wrote a secret into."""
        if _SECRET_HEADER.search(text) or _SECRET_PATH.search(text):
            return True
        if "$" in text and any(_secret_variable(name) or name in self.variables
                               for name in _VARIABLE_REFERENCE.findall(text)):
            return True
        if self.files and "://" not in text:
            names = {base_name(f) for f in self.files}
            for part in (text, text.rsplit("@", 1)[-1], text.rsplit("=", 1)[-1], text.rsplit("<", 1)[-1]):
                if part and (posixpath.normpath(part) in self.files or base_name(part) in names):
                    return True
        return False

    def words(self, index: int, words: Sequence[str]) -> bool:
        return any(self.text(w) for w in words) or any(self.output[j] for j in self.hosted[index])

    def stdin(self, index: int) -> bool:
        commands = self.line.commands
        command = commands[index]
        if command.stdin is Stream.PIPE and command.stage > 0 and any(
                commands[j].stage < command.stage and self.output[j] for j in self.members.get(command.pipeline, ())):
            return True
        for redirect in command.redirects:
            if redirect.descriptor in (None, 0) and redirect.operator in ("<", "<&", "<>", "<<<", "<<", "<<-") \
                    and self.text(redirect.target):
                return True
        return False

    def _settle(self) -> None:
        line = self.line
        commands = line.commands
        for _ in range(6):
            changed = False
            bare_secret = any(self.output[i] for i, c in enumerate(commands) if c.in_substitution and c.host is None)
            assignments = [*line.assignments, *(pair for c in commands for pair in c.environment)]
            for name, value in assignments:
                generated = bare_secret and ("$(" in value or "`" in value)
                if name not in self.variables and (generated or self.text(value)):
                    self.variables.add(name)
                    changed = True
            for index, command in enumerate(commands):
                if not self.output[index] and self._outputs_secret(index, command):
                    self.output[index] = True
                    changed = True
                if self.output[index] or (not _is_sink(command) and self.words(index, command.args)):
                    changed |= self._write_files(index, command)
            if not changed:
                return

    def _outputs_secret(self, index: int, command: SimpleCommand) -> bool:
        if _prints_secret(command) or self.stdin(index):
            return True
        if not _is_sink(command) and self.words(index, command.words):
            return True
        if command.script is not None:
            end = index + 1
            while end < len(self.line.commands) and self.line.commands[end].depth > command.depth:
                if self.output[end]:
                    return True
                end += 1
        return False

    def _write_files(self, index: int, command: SimpleCommand) -> bool:
        written: set[str] = set()
        if self.output[index]:
            for redirect in command.redirects:
                if redirect.operator in (">", ">>", ">|", "&>", "&>>") and redirect.descriptor in (None, 1) \
                        and redirect.target:
                    written.add(posixpath.normpath(redirect.target))
        if does(command, Does.COPIES) and (self.output[index] if command.program == "tee"
                                            else self.words(index, command.args)):
            written.update(posixpath.normpath(a.split("=", 1)[-1]) for a in command.args
                           if a and not a.startswith("-") and not self.text(a))
        new = written - self.files
        self.files |= new
        return bool(new)


def _secret_refusal(line: CommandLine) -> str | None:
    """A secret (a credential variable, file, token-printing command or the environment)
    reaching a command that sends data off the machine, through words, substitutions, pipes,
    variables or files written in the line."""
    sinks = [index for index, command in enumerate(line.commands) if _is_sink(command)]
    if not sinks:
        return None
    secrets = _Secrets(line)
    for index in sinks:
        command = line.commands[index]
        code = _inline_sink(command)
        if code is not None and (_CODE_ENVIRONMENT.search(code) or secrets.text(code)):
            return "sends a secret over the network"
        if secrets.words(index, list(_sent_words(command))) or secrets.stdin(index) or _sends_credential_file(command):
            return "sends a secret over the network"
    return None


#: Credentials written out in plain text, by the shapes their issuers document: GitHub tokens
#: (docs.github.com, "About authentication to GitHub": ghp_, gho_, ghu_, ghs_, ghr_,
#: github_pat_), AWS access key ids (IAM User Guide, "Unique identifiers": AKIA, ASIA), Slack
#: tokens (api.slack.com/authentication/token-types: xoxb-, xoxp-, xapp-), OpenAI and Anthropic
#: API keys (sk-, sk-ant-), Google API keys (AIza), JSON Web Tokens (RFC 7519: three base64url
#: parts, the first of which decodes to '{"'), and PEM private keys (RFC 7468).
_LITERAL_SECRET = LazyRegex(
    r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|(AKIA|ASIA)[0-9A-Z]{16}|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|xapp-[A-Za-z0-9-]{10,}|sk-(ant-)?[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{30,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.)|-----BEGIN [A-Z ]*PRIVATE KEY-----"
)
#: Options whose value is a secret: given as written text (not ``$VAR``), the line carries it.
_SECRET_OPTION = LazyRegex(r"(?i)^--?(token|password|passwd|pass|secret|api-?key|access-?key|client-secret|auth)$")
#: Targets whose removal or overwrite destroys a machine or a home: rm(1) -r of /, ~, $HOME,
#: a glob at the root; mkfs(8); dd(1) or a redirection onto a block device.
_DESTROYED = frozenset({"/", "/*", "~", "~/", "~/*", "$HOME", "${HOME}", "$HOME/", "$HOME/*", "*", ".", "..", "/home"})


def _plain_secret(line: CommandLine, text: str) -> str | None:
    """A secret written out in the command itself (a token's shape, or the value of a
    ``--token``/``--password`` option): quoting the command would repeat it."""
    if _LITERAL_SECRET.search(text) is not None:
        return "carries a credential in plain text"
    for simple in line.commands:
        words = simple.args
        for index, word in enumerate(words):
            name, _, attached = word.partition("=")
            if _SECRET_OPTION.match(name):
                value = attached or (words[index + 1] if index + 1 < len(words) else "")
                if value and not value.startswith("$") and not value.startswith("-"):
                    return "carries a credential in plain text"
    return None


def _destroys(line: CommandLine) -> str | None:
    """A command that destroys a machine's or a home's data (rm -r of /, ~; mkfs; dd onto
    a device)."""
    for simple in line.commands:
        program, args = simple.program, simple.args
        recursive = any(a.startswith("-") and ("r" in a.lower() or a == "--recursive") for a in args)
        if program == "rm" and recursive and any(a in _DESTROYED for a in args if not a.startswith("-")):
            return "destroys the machine's or the home's files"
        wipes = program is not None and (program.startswith(("mkfs", "wipefs", "shred")))
        if wipes and any(a.startswith("/dev/") for a in args):
            return "destroys a disk"
        if program == "dd" and any(a.startswith("of=/dev/") for a in args):
            return "destroys a disk"
        if any(r.target.startswith("/dev/sd") or r.target.startswith("/dev/nvme") for r in simple.redirects
               if r.operator in (">", ">>", ">|")):
            return "destroys a disk"
    return None


#: Directories whose files the system runs or trusts (hier(7), the Filesystem Hierarchy Standard
#: 3.0): making them writable by every user lets any user replace what root runs.
_SYSTEM_TREES = frozenset({"/", "/*", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/var", "/boot",
                           "/opt", "/root", "/home", "/srv", "/dev", "/sys", "/proc", "/run", "/usr/local",
                           "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/local/bin", "/var/lib", "/var/spool",
                           "~", "$HOME", "${HOME}"})
#: chmod(1) modes that give "others" write permission: octal with the last digit's 2 bit set
#: (2, 3, 6, 7), or a symbolic clause for ``o`` or ``a`` that adds or sets ``w``.
_WORLD_WRITABLE_OCTAL = LazyRegex(r"^[0-7]*[2367]$")
_WORLD_WRITABLE_SYMBOLIC = LazyRegex(r"(?:^|,)[ugoa]*[oa][ugoa]*[+=][rwxXst]*w")
#: Directories every user may write to (FHS 3.0: /tmp, /var/tmp; /dev/shm, /run/shm), or the
#: current directory (an empty PATH entry or ``.``: POSIX XBD 8.3, PATH).
_WORLD_WRITABLE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/shm", "/var/crash")


def _world_writable_system(command: SimpleCommand) -> bool:
    """chmod(1) giving every user write permission on a system directory or a home."""
    if command.program != "chmod":
        return False
    operands = [a for a in command.args if not a.startswith("-")]
    if len(operands) < 2:
        return False
    mode, targets = operands[0], operands[1:]
    if not (_WORLD_WRITABLE_OCTAL.match(mode) or _WORLD_WRITABLE_SYMBOLIC.search(mode)):
        return False
    return any(t.rstrip("/") in _SYSTEM_TREES or t in _SYSTEM_TREES for t in targets)


def _untrusted_path(value: str) -> bool:
    """A ``PATH`` value whose first entry is the current directory (empty or ``.``) or a
    world-writable directory; an entry that is a variable is not judged."""
    first = value.split(":", 1)[0]
    if not first:
        return True
    if first.startswith(("$", "~")):
        return False
    return first in (".", "./") or first.rstrip("/") in _WORLD_WRITABLE_DIRS or first.startswith(
        tuple(d + "/" for d in _WORLD_WRITABLE_DIRS))


def _shell_credential_helper(command: SimpleCommand) -> bool:
    """git-config(1) setting ``credential.helper`` (or ``credential.<url>.helper``, also through
    ``git -c``) to a value starting with ``!``: gitcredentials(7) runs it as shell code."""
    if command.program != "git":
        return False
    args = command.args
    for index, word in enumerate(args):
        key, _, value = word.partition("=")
        if word == "-c" and index + 1 < len(args):
            key, _, value = args[index + 1].partition("=")
            if _CREDENTIAL_HELPER_KEY.match(key) and value.lstrip().startswith("!"):
                return True
        if _CREDENTIAL_HELPER_KEY.match(word) and index + 1 < len(args) and args[index + 1].lstrip().startswith("!"):
            return "config" in args[:index]
        if key and value and _CREDENTIAL_HELPER_KEY.match(key) and value.lstrip().startswith("!"):
            return True
    return False


_CREDENTIAL_HELPER_KEY = LazyRegex(r"(?i)^credential\.(?:.+\.)?helper$")


def _weakens(line: CommandLine) -> str | None:
    """A command that opens the machine to others: a system directory made world-writable
    (``chmod -R 777 /``), a write to a file that grants access or runs commands
    (:data:`TRUST_FILE`: ``>> ~/.ssh/authorized_keys``, ``/etc/sudoers.d/``, cron), a
    world-writable or relative directory put first on ``PATH``, or a git credential helper
    that is shell code."""
    for name, value in line.assignments:
        if name == "PATH" and _untrusted_path(value):
            return "puts a world-writable directory or the current directory first on PATH"
    for command in line.commands:
        if _world_writable_system(command):
            return "makes system files writable by every user"
        if any(TRUST_FILE.search(path) for path in written_files(command)):
            return "writes to a file that grants access or runs commands"
        if any(name == "PATH" and _untrusted_path(value) for name, value in command.environment):
            return "puts a world-writable directory or the current directory first on PATH"
        if _shell_credential_helper(command):
            return "sets a git credential helper that is shell code"
    return None


def _refusal(line: CommandLine, text: str) -> str | None:
    return (_plain_secret(line, text) or _destroys(line) or _download_refusal(line, text) or _weakens(line)
            or _secret_refusal(line))


@functools.cache
def _may_fetch() -> Any:  # a compiled re2 pattern
    """A line that may hold a download: the name, as a word, of a program the program table says
    fetches or connects (its lower-case names: a name in capitals, lwp-request's GET, is a word
    of prose), a URL, or inline code that fetches (Python's urllib)."""
    names = "|".join(re2.escape(name) for name in program_table().fetch_names)
    return re2.compile(rf"(?i)(?:^|[^a-z0-9_.-])({names})(?:[^a-z0-9_-]|$)|://|urlopen|urllib")


#: A line where fetched text could reach an interpreter or a file that runs later: a pipe, a
#: sequence (``&&``, ``;``), a substitution, an evaluator (``eval``, ``exec(…)`` in inline code,
#: ``iex``, ``source``), an output redirection or a downloader's output option (``-o``, ``-O``,
#: ``--output``, ``--out``, ``-OutFile``), or a package installer or runner's verb (``install``,
#: ``add``, ``run``, ``dlx``, ``npx``, ``uvx``…: a package given by address).
_MAY_RUN = LazyRegex(
    r"[|;`>]|&&|\$\(|<\(|(?:^|[^A-Za-z0-9_-])(?:(?i:eval|exec|iex|invoke-expression|source)|install|i|add|run|dlx|"
    r"x|inject|create|init|npx|pnpx|bunx|uvx|pipx)(?:[^A-Za-z0-9_-]|$)|(?:^|\s)-[A-Za-z]*[oO](?:\s|=|$)|--out|"
    r"(?i:-outfile)")
_WORD = LazyRegex(r"[^ ]+")
#: Typographic quotation marks and guillemets prose puts around a command; read as spaces.
_PROSE_QUOTES = {code: " " for code in (0xAB, 0xBB, *range(0x2018, 0x2020), 0x2039, 0x203A)}
#: :func:`find_download_and_run` looks at most this many words before a network word for the
#: start of the command, at most this many characters after it for its end, and at most this
#: many network words in one text.
_PROSE_WORDS_BEFORE = 12
_PROSE_CHARS_AFTER = 400
#: At most this many command lines are parsed for one text (each a few tens of microseconds);
#: a text that needs more is reported as :data:`TOO_MANY_TO_SCREEN`.
_PROSE_PARSES = 2000
#: Pipe and sequence operators written as words of prose; :func:`_prose_ends` tries an end
#: after each of this many words that follow one.
_OPERATOR_WORDS = frozenset({"|", "|&", "||", "&&", ";"})
_PROSE_WORDS_AFTER_OPERATOR = 6
_OPERATOR_INSIDE = LazyRegex(r"\|&?|&&|;")
#: A word starting so continues the command before it (an option, a quoted argument, a
#: redirection or an operator): no candidate ends just before it.
_CONTINUES = ("-", "'", '"', ">", "<", "|", "&", "2>", "1>")
#: Characters of a text's head and of its tail that are read (the classifier's window).
_PROSE_SCAN_CHARS = 65_536
#: What :func:`find_download_and_run` returns for a text holding too many network words to read.
TOO_MANY_TO_SCREEN = "(too many network commands to screen)"


def _word_start(line: str, index: int) -> bool:
    """Whether a command may start at ``line[index]``: the line's start, or a word after a
    space, a quotation mark, a backtick, ``:`` or ``;``, that is not itself an expansion or a
    quoted string (``"$(curl …)" and retry`` is prose around a substitution, not a command
    named by one)."""
    if index == 0:
        return line[0] != " "
    return line[index] not in " $<`\"'(" and line[index - 1] in " \"'`:;"


def find_download_and_run(text: str) -> str | None:
    """The command inside ``text`` (a tool's output, a sentence such as "Run bash <(curl -fsSL
    https://…) to sign in.", a lesson's content) that runs what it downloads, or ``None``.

    Judged by structure, not by phrase: in a line with a pipe, a sequence, a substitution, an
    evaluator, an output redirection or option, or a package verb (:data:`_MAY_RUN`; without
    one nothing fetched can reach an interpreter or a file),
    around each word that may fetch (a network program such as curl, wget, fetch, aria2c,
    nc, Invoke-WebRequest; a URL; urllib), the command lines starting at each of up to
    :data:`_PROSE_WORDS_BEFORE` words before it and ending where prose may follow
    (:func:`_prose_ends`) are parsed with :func:`parse_command_line` (typographic quotes read
    as spaces) and judged by
    the screen's download rule: fetched or generated text reaching an interpreter by a pipe
    (also through ``tee``, ``sudo -E``, ``env``, ``doas``), by process substitution (``bash
    <(…)``, ``bash < <(…)``, ``source <(…)``), by ``-c "$(…)"``, by ``eval``/``iex``, by a
    variable set to it (``x=$(curl …); bash -c "$x"``), a pipe into any program that runs its
    standard input (:func:`_runs_stdin_as_code`: ``sudo -i``, ``su``, ``runuser``, ``env -S``,
    ``at``, ``crontab -``, ``ssh host sh``, ``docker exec -i c sh``, ``kubectl exec``), a file
    downloaded and then run in the same line (by path, by name, or installed as a package file:
    ``dpkg -i``, ``rpm -U``, ``apt install ./x.deb``), a package installed by URL, or a download
    written to a shell start-up file or a file that grants access (``>> ~/.bashrc``, ``-O
    ~/.ssh/authorized_keys``). Every candidate, bare command or sentence, goes through the same
    check as :func:`screen_command`'s download rule. Returns the offending command's source text
    (cleaned, at most 300 characters), or :data:`TOO_MANY_TO_SCREEN` when the text needs more
    than :data:`_PROSE_PARSES` parses (it fails closed). Only the first and last
    :data:`_PROSE_SCAN_CHARS` characters of a longer text are read. Never raises.
    """
    if len(text) > 2 * _PROSE_SCAN_CHARS:
        text = text[:_PROSE_SCAN_CHARS] + "\n" + text[-_PROSE_SCAN_CHARS:]
    cleaned = clean_terminal_text(text).translate(_PROSE_QUOTES)
    parses = 0
    for raw_line in cleaned.split("\n"):
        line = raw_line.replace("\t", " ")
        if not _MAY_RUN.search(line):
            continue  # no pipe, substitution, sequence or evaluator: nothing fetched can reach an interpreter
        tried: set[tuple[int, int]] = set()
        for match in _may_fetch().finditer(line):
            starts = [index for index in range(match.start(), -1, -1) if _word_start(line, index)]
            ends = _prose_ends(line, match.end())
            for start in reversed(starts[:_PROSE_WORDS_BEFORE + 1]):  # the widest reading first
                for end in ends:
                    if (start, end) in tried:
                        continue
                    tried.add((start, end))
                    parses += 1
                    if parses > _PROSE_PARSES:  # fail closed: text built to exhaust the screen is not passed
                        return TOO_MANY_TO_SCREEN
                    candidate = line[start:end].strip().rstrip(".,;:!?")
                    parsed = parse_command_line(candidate)
                    refusal = _download_refusal(parsed, candidate) if parsed.commands else None
                    if refusal is not None and not _code_span_in_prose(parsed, refusal):
                        return candidate[:SCREEN_MAX_CHARS]
    return None


def _prose_ends(line: str, after: int) -> list[int]:
    """Where a command after offset ``after`` of ``line`` may end, prose following it: the end
    of the window, the end of each of the :data:`_PROSE_WORDS_AFTER_OPERATOR` words after a
    pipe or a sequence operator that no option follows (the program that receives the download and its options:
    ``| sudo -i``, ``| kubectl exec -i pod -- sh``, ``&& dpkg -i a.deb``), and the end of each
    word that names an interpreter or an evaluator, closes a substitution or a quotation, or
    is the operand of an interpreter (about 8 at most)."""
    limit = min(len(line), after + _PROSE_CHARS_AFTER)
    ends = [limit]
    previous = ""
    words = list(_WORD.finditer(line, after, limit))
    since_operator = _PROSE_WORDS_AFTER_OPERATOR
    quotes = ""
    for index, word_match in enumerate(words):
        raw = word_match.group()
        if raw in _OPERATOR_WORDS:
            since_operator, quotes = 0, ""
            continue
        since_operator += 1
        quotes += "".join(c for c in raw if c in "'\"")
        joined = _OPERATOR_INSIDE.search(raw)  # ``URL|sudo``, ``a.deb;``: an operator inside the word
        if joined is not None:
            tail = raw[raw.rindex(joined.group()) + len(joined.group()):]
            since_operator, quotes = (1 if tail else 0), "".join(c for c in tail if c in "'\"")
        # ``| sudo -i and retry``: the runner and its words, not cut before an option (``| python3 -m
        # json.tool``), a quoted argument (``| ssh host "cat > f"``) or a redirection
        balanced = quotes.count("'") % 2 == 0 and quotes.count('"') % 2 == 0  # not inside a quoted argument
        if since_operator <= _PROSE_WORDS_AFTER_OPERATOR and balanced and not (
                index + 1 < len(words) and words[index + 1].group().startswith(_CONTINUES)):
            ends.append(word_match.end() - (len(raw) - len(raw.rstrip(".,;:!?"))))
        word = word_match.group().rstrip(".,;:!?")
        bare = word.rstrip("\"'`,")  # a JSON string or a quotation closing right after the word
        name = base_name(bare).lower()
        # after an interpreter's name only when no option follows (``| python3 -m json.tool`` is one command)
        options_follow = index + 1 < len(words) and words[index + 1].group().startswith("-")
        if ((_interpreter(name) is not None or name in _EVALUATORS) and not options_follow) \
                or word.endswith((")", '"', "'", "`")) \
                or ((_interpreter(base_name(previous).lower()) is not None or previous in _SOURCING)
                    and not word.startswith("-")):
            # each way of closing: the whole word, and the word without 1, 2 … of its closing marks
            ends.extend(word_match.start() + cut for cut in range(len(word), len(bare) - 1, -1))
            if len(ends) > 8:
                break
        previous = bare
    return ends


def screen_command(command: str) -> Screened:
    """Screen a command a tool's output suggests before unstuck quotes it.

    Cleans it (:func:`clean_terminal_text`, outer whitespace stripped), then refuses:

    * an empty command, one that spans lines, is longer than :data:`SCREEN_MAX_CHARS`
      characters, carries invisible format characters (bidirectional overrides, zero-width
      marks), or does not parse;
    * fetched or generated text reaching an interpreter: a pipe into a shell, Python, Perl,
      Ruby, Node, PHP, R, Julia, jshell … or ``iex`` (also through ``sudo``/``env``/``timeout``,
      ``script -c``, a shell named by a variable such as ``$SHELL``, or any program named by a
      variable); ``bash <(curl …)``, ``source <(…)``, ``sh -c "$(curl …)"``, ``eval``,
      ``Invoke-Expression``; a command name that is a substitution; awk or sed whose program
      runs commands (``system()``, ``e``) on piped text; xargs/parallel turning piped text into
      code; inline code that evaluates text (``eval``, ``exec``, ``.then(eval)``) or fetches
      and runs a command; a database shell fed a download;
    * code run after a download in the same line: a line that fetches (curl, wget, git clone,
      scp from a host, a cloud storage copy …) and later runs a file by path, a script given to
      an interpreter, a sourced file, or a build in the working tree (make, npm install, pip
      install ., cargo build …), whatever renames or unpacking happened between;
    * a pipe into a program that runs its standard input: sudo ``-i``/``-s``, su, runuser,
      ``env -S``, always; at, batch, ``crontab -``, ssh, ``docker``/``podman exec``, ``kubectl
      exec`` running a shell, when a download feeds the pipe; a download held in a variable
      that is then run (``x=$(curl …); bash -c "$x"``); a downloaded program called by name
      (``curl -o /usr/local/bin/t … && t``) or package file installed (``dpkg -i``, ``rpm -U``,
      ``apt install ./x.deb``, ``pip install x.tgz``); a download written to a shell start-up
      file (``~/.bashrc``, ``/etc/profile.d/``, ``$PROFILE``) or a file that grants access;
    * a package runner or installer given code by address (``npx https://…``, ``pip install
      git+https://…``, ``uvx --from git+…``, ``deno run https://…``, ``go run host/x@v``);
      downloaded content written as root (``| sudo tee``/``dd``); a container given the host
      (``docker run -v /:/host``, ``--privileged``);
    * a secret reaching the network: secret-looking variables (``*TOKEN*``, ``*SECRET*``,
      ``*KEY*``, ``*PASSWORD*``, ``*PAT*``, ``*AUTH*``, ``*WEBHOOK*``, ``DATABASE_URL`` …),
      credential files (``~/.ssh``, ``~/.aws/credentials``, ``.env``, ``/proc/*/environ``,
      ``~/.config/gcloud``, ``~/.kube/config`` …), commands that print tokens (``gh auth
      token``, ``gcloud auth print-access-token`` …) and environment dumps, followed through
      ``$(…)``, pipes, variables and files the line writes, into a command that sends data
      (curl, wget, nc, ssh, scp, rsync, git push, cloud storage copies, ``gh gist create``,
      ``docker run -e``, DNS lookups, inline code that fetches). Credentials a program only
      uses (``ssh -i key``, ``curl --netrc-file``) are not sent;
    * a credential written out in the command (a token of a documented shape, the value of a
      ``--token`` or ``--password`` option): quoting it would repeat the secret;
    * a command that destroys a machine's or a home's data (``rm -rf ~``, ``rm -rf /``,
      ``mkfs``, ``dd of=/dev/…``);
    * a command that opens the machine to others: a system directory or a home made writable
      by every user (``chmod -R 777 /``), any write to a file that grants access or runs
      commands (``>> ~/.ssh/authorized_keys``, ``/etc/sudoers.d/``, cron, systemd units, git
      hooks), a world-writable directory or the current directory first on ``PATH``
      (``export PATH=/tmp/x:$PATH``), a git credential helper that is shell code (``!…``).

    Never raises.
    """
    if has_invisible(command):  # checked before cleaning, which removes them (a hidden override is a refusal)
        return Screened(None, "contains invisible characters")
    text = clean_terminal_text(command).strip()
    if not text:
        return Screened(None, "empty")
    if "\n" in text:
        return Screened(None, "spans lines")
    if len(text) > SCREEN_MAX_CHARS:
        return Screened(None, f"longer than {SCREEN_MAX_CHARS} characters")
    if any(unicodedata.category(char) == "Cf" for char in text):
        return Screened(None, "contains invisible characters")
    if "\ufffd" in text:
        return Screened(None, "is not valid text")
    line = parse_command_line(text)
    if not line.complete or not line.commands:
        return Screened(None, "does not parse as a shell command")
    reason = _refusal(line, text)
    if reason is not None:
        return Screened(None, reason)
    return Screened(text, None)

