"""Names and words: short module docstrings (center/, edge/, agents/, scripts/); in center/ and
edge/ no aliases of old names, no re-exports outside a package's public face, no protocol history
in code (docs/protocol.md has it); one word for each process that forks workers (the zygote, a
model's template); the edge's service logs under its modules' own names.

Read from the source files with ``ast``: nothing of the project is imported.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("center", "edge")
#: Where module docstrings are read: the packages, the sample agents and the scripts.
DOCUMENTED = ("center", "edge", "agents", "scripts")
#: Where the imports of project modules are read.
IMPORTERS = ("center", "edge", "agents", "scripts", "tests")

MAX_DOCSTRING_LINES = 8
"""A module docstring says what the module is in this many lines or fewer; the lines of a literal
block (after a line ending in ``::``: an exception tree, a file's example) are not counted."""


PROTOCOL_HISTORY = re.compile(
    r"protocol \d+\.\d+|\b\d+\.x (peer|center|edge)|\ba \d+\.\d+ (peer|center|edge)\b"
    r"|older than (protocol )?\d+\.\d+|an older (edge|center|peer)",
    re.IGNORECASE,
)


#: The edge's base process that forks workers is the zygote; "template" names a model's template
#: only (edge.service.forking.zygote, edge.service.forking.model_template).
ZYGOTE_CALLED_A_TEMPLATE = re.compile(
    r"\bworker templates?\b|\bedge(?:'s|s'|s)? (?:own )?(?:worker )?templates?\b", re.IGNORECASE
)
#: Where the processes that fork workers are written about.
FORKING_WORDS = ("edge", "scripts", "tests", "docs")

#: A logger of the edge's service named otherwise than for its module.
OTHER_LOGGER = re.compile(
    r"getLogger\((?!__name__\))|\blogging\.(?:debug|info|warning|error|exception)\("
)


def _modules(*folders: str) -> Iterator[Path]:
    for folder in folders:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _dotted(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _top_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, those under a top-level ``if`` or ``try`` included."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_statements(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            handlers = [s for h in node.handlers for s in h.body]
            yield from _top_statements(node.body + handlers + node.orelse + node.finalbody)


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in _top_statements(tree.body):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _all(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.List):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                return [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return []


def docstring_lines(doc: str) -> int:
    """Lines of a docstring, those of its literal blocks left out."""
    count, in_literal, after_marker = 0, False, False
    for line in doc.splitlines():
        stripped, indented = line.strip(), line[:1] in (" ", "\t")
        if in_literal and stripped and not indented:
            in_literal = False
        elif after_marker and stripped and indented:
            in_literal = True
        if stripped and not in_literal:
            after_marker = stripped.endswith("::")
        count += not in_literal
    return count


def test_docstring_lines_leave_literal_blocks_out():
    doc = "Errors.\n\nTree::\n\n    Root\n    └── Leaf\n\nAfter.\n"
    assert docstring_lines(doc) == 5
    assert docstring_lines("One.\n\nTwo\nthree.\n") == 4


def test_module_docstrings_say_what_the_module_is_in_a_few_lines():
    long = {}
    for path in _modules(*DOCUMENTED):
        doc = ast.get_docstring(_tree(path), clean=False)
        if doc and docstring_lines(doc) > MAX_DOCSTRING_LINES:
            long[_rel(path)] = docstring_lines(doc)
    assert not long, (
        f"module docstrings over {MAX_DOCSTRING_LINES} lines (move the explanation to docs/): "
        f"{long}"
    )


def _aliases(path: Path) -> Iterator[tuple[str, str]]:
    """``X = Y`` or ``X = a.Y`` at module level: another name for something named already."""
    tree = _tree(path)
    for node in _top_statements(tree.body):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and _names_something(node.value)
        ):
            yield _rel(path), node.targets[0].id


def _names_something(value: ast.expr) -> bool:
    """``Y`` or ``a.b.Y``: a name, not a value computed here."""
    while isinstance(value, ast.Attribute):
        value = value.value
    return isinstance(value, ast.Name)


def test_no_module_keeps_an_alias_of_an_old_name():
    found = {a for path in _modules(*PACKAGES) for a in _aliases(path)}
    assert not found, (
        "module-level aliases (import the name where it is defined, under its own name): "
        f"{sorted(found)}"
    )


def test_only_a_package_offers_names_defined_elsewhere():
    offered = {}
    for path in _modules(*PACKAGES):
        if path.name == "__init__.py":
            continue
        tree = _tree(path)
        foreign = sorted(set(_all(tree)) - _defined(tree))
        if foreign:
            offered[_rel(path)] = foreign
    assert not offered, f"__all__ lists names defined elsewhere: {offered}"


def test_importers_take_a_name_from_the_module_that_defines_it():
    modules = {_dotted(p): p for p in _modules(*PACKAGES)}
    defined = {name: _defined(_tree(p)) for name, p in modules.items()}
    wrong = []
    for path in _modules(*IMPORTERS):
        for node in ast.walk(_tree(path)):
            if not isinstance(node, ast.ImportFrom) or node.module not in modules:
                continue
            if modules[node.module].name == "__init__.py":
                continue  # a package's public face
            for alias in node.names:
                if alias.name not in defined[node.module] and (
                    f"{node.module}.{alias.name}" not in modules
                ):
                    wrong.append(f"{_rel(path)}:{node.lineno}: {alias.name} from {node.module}")
    assert not wrong, "names imported from a module that does not define them:\n" + "\n".join(wrong)


@pytest.mark.parametrize("folder", PACKAGES)
def test_protocol_history_is_in_docs_protocol_md_only(folder):
    notes = []
    for path in _modules(folder):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PROTOCOL_HISTORY.search(line):
                notes.append(f"{_rel(path)}:{number}: {line.strip()}")
    assert not notes, "protocol history in code (docs/protocol.md keeps it):\n" + "\n".join(notes)


def test_the_zygote_is_never_called_a_template():
    here = Path(__file__).resolve()
    paths = [
        p
        for f in FORKING_WORDS
        for p in sorted((ROOT / f).rglob("*"))
        if p.suffix in (".py", ".md")
    ]
    words = []
    for path in [*paths, ROOT / "README.md"]:
        if path == here:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if ZYGOTE_CALLED_A_TEMPLATE.search(line):
                words.append(f"{_rel(path)}:{number}: {line.strip()}")
    assert not words, "the zygote called a template (say 'the zygote'):\n" + "\n".join(words)


def test_the_edges_service_logs_under_its_modules_names():
    others = []
    for path in _modules("edge/service"):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if OTHER_LOGGER.search(line):
                others.append(f"{_rel(path)}:{number}: {line.strip()}")
    assert not others, "a logger not named for its module:\n" + "\n".join(others)
