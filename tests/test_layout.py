"""The layout by stages (#38): every import of the package (module level, inside
functions, under TYPE_CHECKING), read with `ast`, goes to the same stage or one below it,
and no modules import each other round a circle. The stages, lowest first, are the ones
docs/design.md's map draws; the top level holds the entry points and a few shared
utilities, no more than eight modules."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "compilediag"

# each stage, lowest first: a module may import its own stage's and those below
STAGES = {
    "compilediag.errors": 0, "compilediag.paths": 0, "compilediag.fsutil": 0,
    "compilediag.report": 1,
    "compilediag.trace": 2,
    "compilediag.fixes": 3,
    "compilediag.harness": 4,
    "compilediag.analysis": 5,
    "compilediag.render": 6, "compilediag.gate": 6,
    "compilediag.inprocess": 7, "compilediag.testing": 7, "compilediag.cli": 7,
    "compilediag.__main__": 7, "compilediag": 7,
}  # fmt: skip


def modules() -> dict[str, Path]:
    out = {}
    for p in PACKAGE.rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that `name` imports, wherever the import statement stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in known else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def stage(name: str) -> int:
    best = max((k for k in STAGES if name == k or name.startswith(k + ".")), key=len)
    return STAGES[best]


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_a_higher_stage() -> None:
    upward = [
        f"{m} (stage {stage(m)}) imports {d} (stage {stage(d)})"
        for m, deps in graph().items()
        for d in sorted(deps)
        if stage(d) > stage(m)
    ]
    assert upward == []


def test_no_import_circle() -> None:
    assert circles(graph()) == []


def test_the_checks_see_a_circle_inside_a_function_and_an_upward_import() -> None:
    """The checker on imports written as today's circles were (one side inside a function,
    one under TYPE_CHECKING): a circle is found, and so is an import of a higher stage."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        a, b = Path(d, "a.py"), Path(d, "b.py")
        a.write_text("def f():\n    from compilediag.harness.b import g\n")
        b.write_text(
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from compilediag.harness.a import f\n"
            "from compilediag.cli.app import app\n"
        )
        known = {"compilediag.harness.a": a, "compilediag.harness.b": b, "compilediag.cli.app": a}
        g = {n: imports(n, p, known) for n, p in list(known.items())[:2]}
    assert circles(g) == [["compilediag.harness.a", "compilediag.harness.b"]]
    assert stage("compilediag.cli.app") > stage("compilediag.harness.b")
    assert "compilediag.cli.app" in g["compilediag.harness.b"]


def test_the_top_level_holds_few_modules_and_each_package_says_what_it_owns() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 8, top
    for init in PACKAGE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc) > 80, f"{init.parent.name}/__init__.py says nothing of what it owns"
    design = (ROOT / "docs" / "design.md").read_text()
    for package in PACKAGE.glob("*/__init__.py"):
        assert f"`{package.parent.name}/`" in design, (
            f"docs/design.md's map lacks {package.parent.name}/"
        )


# Rooms of one concern (#54): a module holds one concern, a function reads as its steps.
MODULE_LINES = 500
FUNCTION_LINES = 80
# a module may run longer when its docstring says it is one table of cases
TABLE_MARKER = "one table"
# modules over MODULE_LINES kept whole, each with why
LONG_MODULES: dict[str, str] = {}
# functions over FUNCTION_LINES not yet split, each with why
LONG_FUNCTIONS: dict[str, str] = {}


def long_modules() -> list[str]:
    out = []
    for p in sorted(PACKAGE.rglob("*.py")):
        text = p.read_text()
        doc = ast.get_docstring(ast.parse(text)) or ""
        if len(text.splitlines()) > MODULE_LINES and TABLE_MARKER not in doc.lower():
            out.append(p.relative_to(ROOT).as_posix())
    return out


def long_functions() -> list[str]:
    out = []
    for p in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                if node.end_lineno - node.lineno + 1 > FUNCTION_LINES:
                    out.append(f"{p.relative_to(ROOT).as_posix()}:{node.name}")
    return out


def test_no_module_runs_over_500_lines_unless_it_is_one_table() -> None:
    """A module over 500 lines is split by concern, or says in its docstring that it is one
    table of cases; the allow-list holds only those kept whole, each with why."""
    found = long_modules()
    assert sorted(set(found) - set(LONG_MODULES)) == []
    assert sorted(set(LONG_MODULES) - set(found)) == [], "split: take it off LONG_MODULES"


def test_no_function_runs_over_80_lines() -> None:
    """A function over 80 lines becomes its steps, each a named helper; the allow-list
    holds only those not split yet, and shrinks."""
    found = long_functions()
    assert sorted(set(found) - set(LONG_FUNCTIONS)) == []
    assert sorted(set(LONG_FUNCTIONS) - set(found)) == [], "split: take it off LONG_FUNCTIONS"


# The house by question (#61): a folder's name answers "what is in here", and none holds
# more than about a dozen modules (a flat room of 34 modules hid which ones answer a
# question); each package, rooms inside a stage too, says what it owns, and the design's
# map names each of analysis/'s rooms.
MAX_MODULES = 14


def test_no_folder_holds_more_than_about_a_dozen_modules() -> None:
    crowded = {
        d.relative_to(ROOT).as_posix(): n
        for d in [PACKAGE, *(p.parent for p in PACKAGE.rglob("*/__init__.py"))]
        if (n := len([p for p in d.glob("*.py") if p.name != "__init__.py"])) > MAX_MODULES
    }
    assert crowded == {}


def test_each_room_says_what_it_owns_and_the_map_names_analysis_rooms() -> None:
    design = (ROOT / "docs" / "design.md").read_text()
    for init in PACKAGE.rglob("*/__init__.py"):
        if "bootstrap" in init.parts:
            continue  # the job's bootstrap: standard library only, said in its modules
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc) > 80, f"{init.parent.relative_to(ROOT)}/__init__.py says nothing"
    for room in (PACKAGE / "analysis").glob("*/__init__.py"):
        assert f"{room.parent.name}/" in design, (
            f"docs/design.md's map lacks analysis/{room.parent.name}/"
        )
    # "advice" names one thing: what a finding says to do, decided in analysis/; the
    # catalogue of fixes is fixes/
    assert not list((PACKAGE / "advice").rglob("*.py"))  # (a stale __pycache__ is no package)
    assert not [p for p in PACKAGE.rglob("*_advice.py") if "analysis" not in p.parts]


def test_the_tests_mirror_the_package() -> None:
    """A change to a room has its tests at the same place: each package of compilediag and
    each room of analysis/ has a folder of tests under tests/, and every folder of tests
    is a package's place (the end-to-end and whole-project tests stay at the top)."""
    tests = ROOT / "tests"
    folders = {
        p.parent.relative_to(tests).as_posix()
        for p in tests.rglob("test_*.py")
        if "fixtures" not in p.parts and p.parent != tests
    }
    packages = {p.parent.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*/__init__.py")}
    assert folders - packages == set(), "a folder of tests no package is at"
    wanted = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    wanted |= {f"analysis/{p.parent.name}" for p in (PACKAGE / "analysis").glob("*/__init__.py")}
    assert wanted - folders == set(), "a package whose tests are not at its place"
