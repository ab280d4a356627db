"""pyaisvc's modules import each other in one direction only: no cycles, nothing upwards.

Every ``import``/``from ... import`` of a pyaisvc module, also inside
functions, is read with ``ast`` (no module is imported). A module may import
modules of a lower layer, and modules of its own unit (the entry of LAYERS
it falls under: a module, or a package with everything under it, e.g. all
of pyaisvc.bench); never a higher layer, nor another unit of its own layer
(guest.chat does not borrow from bench). An import cycle fails anywhere.
The folders group modules by role (model/, image/, guest/, cluster/); the
layers cut across them. The layers, lowest first (README.md, "Layout",
says the same):

    0  errors, the package itself (its __version__), the folders' __init__
    1  model.refmath, model.quant, model.hfsources, cluster.workers, cheader
    2  model.assets, image.fsimg, model.tokenizer, guest.symbolize, model.sampling
    3  guest.qemu, model.reference, image.modelimage, model.chattemplate, image.fscheck
    4  model.export, guest.llmguest, model.translate, guest.template
    5  bench, guest.chat, cluster.fuzz
    6  serve
    7  commands
    8  cli
    9  __main__

A new module needs a line in LAYERS: its place in the order is a decision.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pyaisvc"

# module (or package: all its modules) -> layer; the longest matching name wins
LAYERS: dict[str, int] = {
    "pyaisvc": 0, "pyaisvc.errors": 0,
    "pyaisvc.model": 0, "pyaisvc.image": 0, "pyaisvc.guest": 0, "pyaisvc.cluster": 0,
    "pyaisvc.model.refmath": 1, "pyaisvc.model.quant": 1, "pyaisvc.model.hfsources": 1,
    "pyaisvc.cluster.workers": 1, "pyaisvc.cheader": 1,
    "pyaisvc.model.assets": 2, "pyaisvc.image.fsimg": 2, "pyaisvc.model.tokenizer": 2,
    "pyaisvc.guest.symbolize": 2, "pyaisvc.model.sampling": 2,
    "pyaisvc.guest.qemu": 3, "pyaisvc.model.reference": 3, "pyaisvc.image.modelimage": 3,
    "pyaisvc.model.chattemplate": 3, "pyaisvc.image.fscheck": 3,
    "pyaisvc.model.export": 4, "pyaisvc.guest.llmguest": 4, "pyaisvc.model.translate": 4,
    "pyaisvc.guest.template": 4,
    "pyaisvc.bench": 5, "pyaisvc.guest.chat": 5, "pyaisvc.cluster.fuzz": 5,
    "pyaisvc.serve": 6,
    "pyaisvc.commands": 7,
    "pyaisvc.cli": 8,
    "pyaisvc.__main__": 9,
}


def module_names(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the package."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, modules: set[str]) -> set[str]:
    """The pyaisvc modules that module `name` imports anywhere in its file."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package upwards
                anchor = name.split(".")[: len(name.split(".")) - node.level + is_package]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return {m for m in found if m in modules and m != name}


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    mods = module_names(package)
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


def layer(name: str) -> int | None:
    best = max((k for k in LAYERS if name == k or name.startswith(k + ".")), key=len,
               default=None)
    return None if best is None else LAYERS[best]


def unit(name: str) -> str:
    """pyaisvc.bench.load.run -> pyaisvc.bench: the entry of LAYERS a module falls under."""
    return max((k for k in LAYERS if name == k or name.startswith(k + ".")), key=len,
               default=name)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """"a (layer 2) imports b (layer 4)" for every import of a higher layer, or of
    another unit of the same layer."""
    bad = []
    for a, targets in sorted(graph.items()):
        for b in sorted(targets):
            la, lb = layer(a), layer(b)
            if la is None or lb is None or lb < la or (lb == la and unit(a) == unit(b)):
                continue
            bad.append(f"{a} (layer {la}) imports {b} (layer {lb})")
    return bad


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)) is not None:
            return cycle
    return None


def test_every_module_has_a_layer() -> None:
    missing = [m for m in module_names() if layer(m) is None]
    assert not missing, f"add these modules to LAYERS in {__file__}: {missing}"


def test_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_import_goes_up_a_layer() -> None:
    bad = upward_imports(import_graph())
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def test_the_checks_see_cycles_and_upward_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pyaisvc"
    (pkg / "commands").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "commands/__init__.py").write_text("")
    (pkg / "errors.py").write_text("def f():\n    from pyaisvc.commands import run\n")
    (pkg / "commands/run.py").write_text("from pyaisvc import errors\n")
    graph = import_graph(pkg)
    assert graph["pyaisvc.errors"] == {"pyaisvc.commands.run"}
    assert find_cycle(graph) == ["pyaisvc.commands.run", "pyaisvc.errors",
                                 "pyaisvc.commands.run"]
    assert upward_imports(graph) == ["pyaisvc.errors (layer 0) imports pyaisvc.commands.run "
                                     "(layer 7)"]
    (pkg / "guest").mkdir()
    (pkg / "guest/__init__.py").write_text("")
    (pkg / "guest/chat.py").write_text("from pyaisvc.bench import console\n")
    (pkg / "bench").mkdir()
    (pkg / "bench/__init__.py").write_text("")
    (pkg / "bench/console.py").write_text("from pyaisvc.bench import __name__\n")
    graph = import_graph(pkg)
    assert graph["pyaisvc.bench.console"] == {"pyaisvc.bench"}
    assert "pyaisvc.guest.chat (layer 5) imports pyaisvc.bench.console (layer 5)" in \
        upward_imports(graph)
    # a folder groups modules by role, not into one unit: two of its modules of one
    # layer still may not import each other
    (pkg / "model").mkdir()
    (pkg / "model/__init__.py").write_text("")
    (pkg / "model/reference.py").write_text("from pyaisvc.model import chattemplate\n")
    (pkg / "model/chattemplate.py").write_text("")
    assert "pyaisvc.model.reference (layer 3) imports pyaisvc.model.chattemplate (layer 3)" in \
        upward_imports(import_graph(pkg))
