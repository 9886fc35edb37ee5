"""The `harken` program itself: version, help, and a clear error for a missing or unknown
command."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata

import pytest

import harken_cli


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        harken_cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"harken {importlib.metadata.version('harken')}"


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert harken_cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in harken_cli.COMMANDS)


def test_an_unknown_command_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        harken_cli.main(["transcibe"])
    assert done.value.code == 2
    assert "unknown command 'transcibe'" in capsys.readouterr().err


def test_no_command_prints_the_usage_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert harken_cli.main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: harken") and all(name in err for name in harken_cli.COMMANDS)


@pytest.mark.parametrize(
    ("command", "placeholders"),
    [
        ("serve", {"--beam-size": "0 keeps", "--blank-penalty": "-1", "--lookahead": "-1"}),
        (
            "train",
            {
                "--max-steps": "0: no limit",
                "--p-lowpass": "3.4-7 kHz",
                "--p-telephone": "mu-law",
                "--p-8bit": "8-bit",
            },
        ),
    ],
)
def test_every_flag_of_serve_and_train_says_what_it_does(
    command: str, placeholders: dict[str, str]
) -> None:
    """Each flag's help is a line of what it does, beyond its default, and says what a
    placeholder value (0, -1) means."""
    parser = argparse.ArgumentParser()
    importlib.import_module(harken_cli.COMMANDS[command][0]).add_arguments(parser)
    helps = {
        a.option_strings[-1]: a.help or ""
        for a in parser._actions
        if a.option_strings and a.option_strings[-1] != "--help"
    }
    bare = [flag for flag, text in helps.items() if len(text.split("(default")[0].split()) < 3]
    assert not bare, f"flags without a line of what they do: {bare}"
    for flag, words in placeholders.items():
        assert words in helps[flag], (flag, helps[flag])
