"""The README and the user guide stay short, runnable and in step with the code."""

from __future__ import annotations

import re
from pathlib import Path

from trspark.keys import markdown_table

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CONFIGURE = ROOT / "docs" / "configure.md"


def test_configuration_table_matches_the_code():
    text = CONFIGURE.read_text()
    start = text.index("<!-- conf-table:start -->") + len("<!-- conf-table:start -->")
    end = text.index("<!-- conf-table:end -->")
    assert text[start:end].strip() == markdown_table().strip(), "regenerate with `trspark conf --markdown`"


def test_readme_quick_start_has_exactly_the_two_commands():
    text = README.read_text()
    block = text.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]


def test_readme_is_at_most_250_lines():
    assert len(README.read_text().splitlines()) <= 250


def test_relative_links_of_the_readme_and_the_guide_resolve():
    for page in [README, *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"


def test_the_plain_setting_list_names_every_key_of_the_table():
    from click.testing import CliRunner

    from trspark.cli import cli

    listed = {line.split()[0] for line in CliRunner().invoke(cli, ["conf"]).output.splitlines()
              if line.startswith("spark.trspark.")}
    in_table = set(re.findall(r"^\| `(spark\.trspark\.[^`]+)`", markdown_table(), re.M))
    assert listed == in_table
