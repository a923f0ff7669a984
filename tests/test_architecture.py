"""The architecture, checked by tools: the import contracts hold, and the extras match the imports.

``[tool.importlinter]`` in pyproject.toml names the rules (layers tools -> converters -> serde ->
schema; schema imports nothing above it; torch only under ``pt2x.serde.torch``; onnx only under
the converters that emit or consume ONNX; serde's and the converters' inner flow; no import
cycles inside any package). ``lint-imports`` checks them over every import statement of the
package, lazy ones inside functions included.

From the same import graph: every dependency a user installs (base or extra) is imported by the
library, and every third-party module the library imports is declared. The project's scripts
(benchmarks/, fuzz/, scripts/: the workshop) are outside the package, so outside the graph
and the wheel.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys

import pytest
from paths import REPO
from workshop import PACKAGES, tool_scripts

LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def test_import_contracts_hold():
    # This interpreter's import-linter (the `lint-imports` command), without its cache folder
    # (it would be written into the repository).
    r = subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--config", "pyproject.toml", "--no-cache", "--no-logo"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, f"lint-imports exited {r.returncode}:\n{r.stdout}{r.stderr}"
    # every contract in the file was read and checked (a misspelt section would check nothing)
    with open(os.path.join(REPO, "pyproject.toml"), encoding="utf-8") as f:
        declared = f.read().count("[[tool.importlinter.contracts]]")
    assert declared >= 5
    assert re.search(rf"Contracts: {declared} kept, 0 broken", r.stdout), r.stdout


# --------------------------------------------------------------- every extra a user installs is used

# Third-party modules the library imports without declaring them: they come with a declared one.
COMES_WITH = {"sympy": "torch",  # torch's symbolic shapes, used only under pt2x.serde.torch
              "dacite": "ai-edge-model-explorer"}  # Model Explorer's dataclass reader, in pt2x.explorer.main


@functools.lru_cache(maxsize=None)
def _graph():
    import grimp

    return grimp.build_graph("pt2x", include_external_packages=True)


def test_the_scripts_are_outside_the_package():
    """The workshop (benchmarks/, fuzz/, scripts/) sits at the repository root, outside the wheel:
    the package's import graph holds none of its modules, pyproject's packages list none of its
    folders, and tools/ (the CLI) keeps no scripts folder."""
    assert tool_scripts(), "no script found in the workshop"
    names = {s.rsplit(".", 1)[-1] for s in tool_scripts()}
    in_package = {m for m in _graph().modules if m.startswith("pt2x.") and m.rsplit(".", 1)[-1] in names}
    assert not in_package, f"scripts inside the package: {sorted(in_package)}"
    with open(os.path.join(REPO, "pyproject.toml"), encoding="utf-8") as f:
        pyproject = f.read()
    assert not any(f'"pt2x.{pkg}' in pyproject for pkg in PACKAGES)
    assert not os.path.exists(os.path.join(REPO, "tools", "scripts"))
    # namespace packages: a folder of the repository root with an __init__.py would be a pt2x subpackage
    assert not [pkg for pkg in PACKAGES if os.path.exists(os.path.join(REPO, pkg, "__init__.py"))]


def test_the_workshop_edits_no_import_path():
    """The workshop imports by package and gives children a ``PYTHONPATH``: no ``sys.path`` edits."""
    for pkg in PACKAGES:
        for name in sorted(os.listdir(os.path.join(REPO, pkg))):
            if name.endswith(".py"):
                with open(os.path.join(REPO, pkg, name), encoding="utf-8") as f:
                    code = [line for line in f if "sys.path" in line and "``sys.path``" not in line]
                assert not code, f"{pkg}/{name} edits sys.path: {code}"


def test_no_module_imports_a_package_above_it_that_imports_it_back():
    """A cycle through a package's ``__init__`` (``serde/torch/deserialize.py`` importing
    ``load`` from ``pt2x.serde``, which imports the bridge lazily): the acyclic contract compares
    siblings only, so this one is checked here, lazy imports included."""
    graph = _graph()
    cycles = [
        (module, above)
        for module in graph.modules if module.startswith("pt2x.")
        for above in graph.find_modules_directly_imported_by(module)
        if module.startswith(above + ".") and graph.chain_exists(importer=above, imported=module)
    ]
    assert not cycles, f"modules importing a package above them that imports them back: {cycles}"


def test_no_import_cycles_at_all():
    """No module of the package reaches itself again through the modules it imports, lazy
    imports inside functions included (grimp counts every import statement): each direct import
    ``a -> b`` with a chain ``b -> ... -> a`` back would close a cycle."""
    graph = _graph()
    modules = [m for m in graph.modules if m == "pt2x" or m.startswith("pt2x.")]
    assert len(modules) > 100  # the whole package was read
    closing = [
        (module, imported)
        for module in modules
        for imported in graph.find_modules_directly_imported_by(module)
        if (imported == "pt2x" or imported.startswith("pt2x."))
        and graph.chain_exists(importer=imported, imported=module)
    ]
    assert not closing, f"imports that close a cycle: {closing}"


@functools.lru_cache(maxsize=None)
def _library_imports() -> dict[str, set[str]]:
    """Third-party top-level module -> the pt2x modules that import it (lazily or not). The
    scripts are not in the package (``test_the_scripts_are_outside_the_package``): users install
    extras for the library, not for the scripts."""
    graph = _graph()
    library = {m for m in graph.modules if m == "pt2x" or m.startswith("pt2x.")}
    found: dict[str, set[str]] = {}
    for module in graph.modules - library:
        if module in sys.stdlib_module_names or module == "__future__":
            continue
        users = graph.find_modules_that_directly_import(module) & library
        if users:
            found[module] = users
    return found


def _declared() -> dict[str, list[str]]:
    """Base dependencies ("") and each user extra, as distribution names. The development
    extras (``test``, ``bench``) serve the project's own tests and scripts, not the library."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    groups = {"": project["dependencies"], **project["optional-dependencies"]}
    for development in ("test", "bench"):
        groups.pop(development)
    return {g: [_dist(r) for r in reqs] for g, reqs in groups.items()}


def _dist(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group()).lower()


def _module_dists() -> dict[str, set[str]]:
    from importlib.metadata import packages_distributions

    return {m: {_dist(d) for d in ds} for m, ds in packages_distributions().items()}


def test_every_declared_dependency_is_imported_by_the_library():
    imports, dists = _library_imports(), _module_dists()
    imported_dists = {d for m in imports for d in dists.get(m, ())}
    unused = {g or "base": [d for d in reqs if d not in imported_dists] for g, reqs in _declared().items()}
    assert not any(unused.values()), f"declared but never imported by pt2x: {unused}"


def test_every_library_import_is_declared():
    declared = {d for reqs in _declared().values() for d in reqs}
    dists = _module_dists()
    undeclared = {
        m: sorted(users) for m, users in _library_imports().items()
        if not (dists.get(m, set()) & declared) and COMES_WITH.get(m) not in declared
    }
    assert not undeclared, f"imported by pt2x but in no extra: {undeclared}"
