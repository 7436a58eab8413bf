"""The README's install note for users (#53): `pip install .` from a clone, before the
developers' set-up, naming no host; `.[dev]` said to be for developers."""

from __future__ import annotations

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()


def test_users_install_is_pip_install_dot_and_names_no_host() -> None:
    assert README.index("## Install the tool") < README.index("## Set-up: two commands")
    section = README.split("## Install the tool", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    assert block.strip() == "pip install ."
    assert "://" not in section and "github" not in section.lower()
    assert "`.[dev]`" in section and "developers" in section
    assert "MiB" in section and " s on " in section  # what it added, measured, and how long
