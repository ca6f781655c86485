"""The README's configuration table is the one `trspark conf --markdown` prints."""

from __future__ import annotations

from pathlib import Path

from trspark.config import markdown_table

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_configuration_table_matches_the_code():
    text = README.read_text()
    start = text.index("<!-- conf-table:start -->") + len("<!-- conf-table:start -->")
    end = text.index("<!-- conf-table:end -->")
    assert text[start:end].strip() == markdown_table().strip(), "regenerate with `trspark conf --markdown`"


def test_readme_quick_start_has_exactly_the_two_commands():
    text = README.read_text()
    block = text.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]
