"""The repository README's Python examples run as written."""

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[3] / "README.md"
SECTION = README.read_text().split("## Python", 1)[1].split("\n## ", 1)[0]
EXAMPLES = re.findall(r"```python\n(.*?)```", SECTION, re.S)


def test_the_python_section_has_both_examples():
    assert len(EXAMPLES) == 2


@pytest.mark.parametrize("code", EXAMPLES, ids=["llamaindex", "langchain"])
def test_a_readme_example_runs(code, capsys):
    exec(compile(code, str(README), "exec"), {})
    printed = capsys.readouterr().out
    assert "18" in printed and "11" in printed, printed
