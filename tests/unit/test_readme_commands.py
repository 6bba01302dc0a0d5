"""Every command of the README is run by a test: each command line of its ``bash`` blocks is asked
for, with the exact line, by some test (``readme_command("...")``), and each ``python`` block by a
marker (``python_block("...")``); shell sessions are all run by test_readme_samples. The README also
stays a user's guide: short, its links resolve, and no runnable command hides in prose."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.readme import PROGRAMS, README, ROOT, blocks, commands, readme_command

TESTS = ROOT / "tests"
# Fenced blocks that are no commands: a candidates.json entry, the layout tree.
NOT_COMMANDS = {"json", ""}


def _literal_calls(function: str) -> list[tuple[str, Path]]:
    """The string literals passed as the first argument of ``function(...)`` in tests/, with their file."""
    found = []
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == function
                and node.args
            ):
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.append((first.value, path))
                elif isinstance(first, ast.JoinedStr):  # f"sep_edge {side} &": every side
                    found.extend((text, path) for text in _expand(first))
                elif isinstance(first, ast.Name):  # a name bound to a literal in the same file
                    found.extend((text, path) for text in _bound(path, first.id))
    return found


def _expand(joined: ast.JoinedStr) -> list[str]:
    # Only the {side} pattern is used: both sides.
    text = "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in joined.values)
    return [text.format(side) for side in ("blue", "red")]


def _bound(path: Path, name: str) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]


def test_every_readme_command_is_run_by_a_test():
    asked = {text for text, _ in _literal_calls("readme_command")}
    untested = [command for command in commands() if command not in asked]
    assert untested == [], f"README commands no test runs: {untested}"
    assert len(commands()) >= 8  # the two commands, the participant's and the organizer's paths


def test_every_readme_python_block_is_run_by_a_test():
    markers = {text for text, path in _literal_calls("python_block")}
    for block in blocks("python"):
        assert [m for m in markers if m in block], f"no test runs the README block:\n{block}"


def test_every_readme_code_block_is_a_kind_the_tests_know():
    fences = re.findall(r"^```(\S*)$", README.read_text(encoding="utf-8"), flags=re.MULTILINE)
    # Opening fences are followed by closing bare ones; the set of languages is what matters.
    assert set(fences) <= {"bash", "python", *NOT_COMMANDS}, set(fences)
    for block in blocks(""):
        is_session = block.startswith("$ ")
        is_tree = not any(line.split()[0] in PROGRAMS for line in block.splitlines() if line)
        assert is_session or is_tree, f"a bare block with commands but no '$ ':\n{block}"


def test_no_runnable_command_hides_in_the_readmes_prose():
    # A command with arguments belongs in a bash block, where the tests find it.
    prose = re.sub(r"^```.*?^```$", "", README.read_text(encoding="utf-8"), flags=re.S | re.M)
    spans = re.findall(r"`([^`\n]+)`", prose)
    runnable = [
        s
        for s in spans
        if " " in s and (s.split()[0] in PROGRAMS or s.split()[0].startswith(("./", "python")))
    ]
    assert runnable == []


def test_ci_runs_the_readmes_test_command():
    # The test command runs the whole suite, this test included: CI runs it as the README says.
    command = readme_command("./scripts/test.sh")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert any(line == command or line.startswith(command + " ") for line in ci), ci


def test_the_readme_is_a_short_guide_whose_links_resolve():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        assert (ROOT / target).exists(), target
