"""The `harken` program itself: version, help, and a clear error for an unknown command."""

from __future__ import annotations

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
