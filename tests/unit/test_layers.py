"""The packages import one way (``enerf/__init__.py``'s layers; STYLE.md, convention 16): a module imports
only from its own package or from the layers below its own, at module level or inside a function, and no
modules import each other in a circle. Read off the source with ``ast`` (every ``import`` statement, wherever
it stands; only the type-only ``if TYPE_CHECKING:`` blocks are left out, since they never run)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import enerf

PACKAGE = Path(enerf.__file__).parent


def layers() -> list[set[str]]:
    """The layers, top first, as ``enerf/__init__.py``'s docstring lists them (one line each, ``|`` between
    the packages of one layer, which do not import each other)."""
    block = enerf.__doc__.split("Layers, top first")[1]
    return [set(re.findall(r"[a-z_]+", line.split(":", 1)[1])) for line in block.strip().splitlines()
            if line.strip().startswith("-")]


def _skip_type_checking(tree: ast.AST) -> list[ast.AST]:
    nodes, todo = [], [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        nodes.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return nodes


def module_name(path: Path) -> str:
    parts = ["enerf", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(name: str, path: Path, source: str, modules: set[str]) -> set[str]:
    """The enerf modules that module ``name`` (file ``path``, text ``source``) imports (``from X import name``
    counts as importing X.name when that is a module, else X)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _skip_type_checking(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {m for m in found if m in modules and m != name}


def imports() -> dict[str, set[str]]:
    """{module: the enerf modules it imports} for every module under enerf/."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: imported(name, path, path.read_text(encoding="utf-8"), set(modules)) for name, path in modules.items()}


def wrong_imports(graph: dict[str, set[str]]) -> list[str]:
    floor = {name: k for k, layer in enumerate(layers()) for name in layer}
    return sorted(f"{src} imports {dst}" for src, targets in graph.items() for dst in targets
                  if top(src) and top(dst) and top(src) != top(dst) and floor[top(dst)] <= floor[top(src)])


def top(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def test_every_package_is_in_one_layer():
    listed = [name for layer in layers() for name in layer]
    assert len(listed) == len(set(listed)), "a package in two layers"
    present = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
               if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and any(p.glob("*.py")))}
    assert present == set(listed), f"not in a layer: {present - set(listed)}; gone: {set(listed) - present}"


def test_imports_go_down_the_layers():
    wrong = wrong_imports(imports())
    assert not wrong, "\n".join(wrong)


def test_no_modules_import_each_other_in_a_circle():
    graph = imports()
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1 and not _is_package_of(nxt, node):
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [node, nxt]) if nxt in stack else f"{node} -> {nxt}")
            elif nxt not in state:
                visit(nxt, stack + [node])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])
    assert not cycles, "\n".join(cycles)


def _is_package_of(package: str, module: str) -> bool:
    """A module importing its own package's ``__init__`` (which imports it back) is Python's usual shape."""
    return module.startswith(package + ".")


def test_the_checker_sees_a_wrong_import():
    """A lower package importing a higher one inside a function, and a sideways import, are caught; a
    type-only import is not."""
    graph = imports()
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..export import video\n"
              "def f():\n    from ..train import loop\n    from .. import metrics\n")
    probe = imported("enerf.nn.probe", PACKAGE / "nn" / "probe.py", source, set(graph) | {"enerf.nn.probe"})
    assert probe == {"enerf.train.loop", "enerf.metrics"}
    assert wrong_imports({"enerf.nn.probe": probe}) == ["enerf.nn.probe imports enerf.metrics",
                                                        "enerf.nn.probe imports enerf.train.loop"]
