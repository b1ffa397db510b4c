#!/usr/bin/env python3
"""The import graph of the ``treemask`` Python package has no cycle, and no
core module imports an adapter.

    check_imports.py PACKAGE_DIR     check bindings/python/treemask
    check_imports.py --self-test     check the checker on small packages

Every ``import`` and ``from ... import`` of a treemask module counts,
function-level ones too (a lazy import still makes two modules depend on
each other: issue 31), except those under ``if TYPE_CHECKING:``, which never
run. ``from A import b`` is an edge to ``A.b`` when that is a module, else to
``A``; a module's edge to its own parent package, implied by Python's
import machinery, is not counted (the package runs first either way).

The adapters are ``vllm/`` (the package and everything in it), ``hf.py``,
``torch.py``, ``llama_cpp.py`` and ``_device_mask.py``: they import
engines and torch. Everything else is core and may import no adapter, so
that the library works, and is tested, without any engine.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import ast
import os
import sys
import tempfile
from typing import Dict, List, Optional, Set, Tuple

ADAPTERS = ("vllm", "hf", "torch", "llama_cpp", "_device_mask")

Edge = Tuple[str, str, str, int]  # (from module, to module, file, line)


def modules_of(package_dir: str) -> Dict[str, str]:
    """dotted module name -> file, for every .py under package_dir."""
    root = os.path.basename(os.path.normpath(package_dir))
    out = {}
    for dirpath, dirnames, filenames in os.walk(package_dir):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        rel = os.path.relpath(dirpath, package_dir)
        parts = [root] + ([] if rel == "." else rel.split(os.sep))
        for name in sorted(filenames):
            if name.endswith(".py"):
                stem = name[:-3]
                out[".".join(parts if stem == "__init__" else parts + [stem])] = os.path.join(dirpath, name)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Imports(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: List[Tuple[Optional[str], int, List[str], int]] = []  # (module, level, names, line)

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:  # the else branch runs
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((alias.name, 0, [], node.lineno))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.found.append((node.module, node.level, [a.name for a in node.names], node.lineno))


def edges_of(modules: Dict[str, str]) -> List[Edge]:
    edges = []
    for name, path in modules.items():
        is_package = os.path.basename(path) == "__init__.py"
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        visitor = _Imports()
        visitor.visit(tree)
        for module, level, names, line in visitor.found:
            if level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (level - 1)] if level > 1 else base
                target = ".".join(base + ([module] if module else []))
            else:
                target = module or ""
            candidates = [target + "." + n for n in names] if names else [target]
            for candidate in candidates:
                to = candidate if candidate in modules else target
                # The deepest module that exists (import a.b.c of a package a.b).
                while to and to not in modules:
                    to = to.rpartition(".")[0]
                if not to or to == name:
                    continue
                if name.startswith(to + "."):  # its own parent package
                    continue
                edges.append((name, to, path, line))
    return edges


def cycles(nodes: List[str], edges: List[Edge]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    graph: Dict[str, List[str]] = {n: [] for n in nodes}
    for a, b, _, _ in edges:
        if b not in graph[a]:
            graph[a].append(b)
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    out: List[List[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for n in sorted(nodes):
        if n not in index:
            visit(n)
    return out


def is_adapter(module: str, root: str) -> bool:
    rest = module[len(root) + 1:] if module.startswith(root + ".") else ""
    return rest.split(".")[0] in ADAPTERS if rest else False


def problems(package_dir: str) -> List[str]:
    modules = modules_of(package_dir)
    root = os.path.basename(os.path.normpath(package_dir))
    edges = edges_of(modules)
    out = []
    for component in cycles(list(modules), edges):
        inside = set(component)
        where = ["    %s -> %s (%s:%d)" % (a, b, os.path.relpath(p, os.path.dirname(package_dir)), line)
                 for a, b, p, line in sorted(edges) if a in inside and b in inside]
        out.append("import cycle among %s:\n%s" % (", ".join(component), "\n".join(where)))
    for a, b, p, line in sorted(edges):
        if not is_adapter(a, root) and is_adapter(b, root):
            out.append("core module %s imports the adapter %s (%s:%d): the core must work without any engine"
                       % (a, b, os.path.relpath(p, os.path.dirname(package_dir)), line))
    return out


def self_test() -> int:
    """The checker finds what it must (a function-level cycle, a core module
    importing an adapter, a cycle through a package's submodules) and
    ignores what never runs (TYPE_CHECKING) and a package's own parent."""
    files = {
        "__init__.py": "from .trie import Trie\n",
        "trie.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .matcher import Matcher\n",
        "matcher.py": "from . import trie\n\ndef f():\n    from .hf import x\n",
        "hf.py": "from .trie import Trie\n",
        "vllm/__init__.py": "def __getattr__(n):\n    from . import processor\n",
        "vllm/processor.py": "from . import beam\nfrom ..matcher import f\n",
        "vllm/beam.py": "def g():\n    from .processor import registry\n",
        "vllm/keys.py": "import treemask.vllm.model\n",
        "vllm/model.py": "from .. import trie\n",
    }
    with tempfile.TemporaryDirectory() as tmp:
        pkg = os.path.join(tmp, "treemask")
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(pkg, rel)), exist_ok=True)
            with open(os.path.join(pkg, rel), "w") as f:
                f.write(text)
        found = problems(pkg)
        want_cycle = "import cycle among treemask.vllm.beam, treemask.vllm.processor"
        want_core = "core module treemask.matcher imports the adapter treemask.hf (treemask/matcher.py:4)"
        ok = len(found) == 2 and found[0].startswith(want_cycle) and found[1].startswith(want_core)
        # fixed: no problem left
        with open(os.path.join(pkg, "vllm", "beam.py"), "w") as f:
            f.write("def g():\n    from .keys import x\n")
        with open(os.path.join(pkg, "matcher.py"), "w") as f:
            f.write("from . import trie\n")
        ok = ok and problems(pkg) == []
    print("self-test %s%s" % ("passed" if ok else "FAILED: ", "" if ok else "\n".join(found)))
    return 0 if ok else 1


def main(argv: List[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    found = problems(argv[1])
    if found:
        print("\n".join(found))
        return 1
    print("%s: no import cycle, no core module imports an adapter (%d modules)"
          % (argv[1], len(modules_of(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
