"""The exception tree drawn in ``k2k.errors`` is the whole tree: every subclass of
``K2KError`` in any k2k module stands in it, under its parent, marked internal exactly when
its docstring says so. A class added without its line fails here, not in review."""

import importlib
import pkgutil
import re

import k2k
from k2k import errors
from k2k.errors import K2KError

#: One node of the drawing: the branch (its column gives the depth), the name, the text.
_NODE = re.compile(r"(?P<branch>[├└]── )?(?P<name>\w+)\s{2,}(?P<text>.*)")


def _drawn() -> dict[str, tuple[str | None, bool]]:
    """Each drawn class -> (its parent in the drawing, whether it is marked internal)."""
    doc = errors.__doc__ or ""
    lines = doc.split("::", 1)[1].splitlines()
    nodes: dict[str, tuple[str | None, bool]] = {}
    path: list[str] = []  # the names on the way down to the current line
    for line in lines:
        if line.strip() == "K2KError":
            nodes["K2KError"], path = (None, False), ["K2KError"]
            continue
        found = re.search(r"[├└]── (\w+)", line)
        if found is None:
            continue  # a continuation line or the frame
        depth = (found.start() - 4) // 4 + 1
        node = _NODE.match(line, found.start())
        assert node is not None, line
        del path[depth:]
        nodes[found[1]] = (path[-1], node["text"].startswith("internal"))
        path.append(found[1])
    return nodes


def _every_subclass() -> set[type[K2KError]]:
    for module in pkgutil.walk_packages(k2k.__path__, "k2k."):
        if module.name != "k2k.__main__":
            importlib.import_module(module.name)
    found: set[type[K2KError]] = set()
    todo: list[type[K2KError]] = [K2KError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def test_every_k2k_error_class_is_drawn_under_its_parent():
    drawn = _drawn()
    classes = _every_subclass()
    missing = sorted(f"{c.__module__}.{c.__qualname__}" for c in classes if c.__name__ not in drawn)
    assert not missing, f"draw these in k2k.errors: {missing}"
    wrong = sorted(
        f"{c.__name__} is drawn under {drawn[c.__name__][0]}, derives from {c.__base__.__name__}"
        for c in classes
        if drawn[c.__name__][0] != c.__base__.__name__
    )
    assert not wrong


def test_the_drawing_names_no_class_that_is_gone():
    assert set(_drawn()) == {c.__name__ for c in _every_subclass()} | {"K2KError"}


def test_internal_signals_say_so_in_the_tree_and_their_docstring():
    drawn = _drawn()
    wrong = sorted(
        c.__name__
        for c in _every_subclass()
        if drawn[c.__name__][1] != ("Internal:" in (c.__doc__ or ""))
    )
    assert not wrong
    internal = {name for name, (_, marked) in drawn.items() if marked}
    assert {"Fenced", "DriverGone", "RegistryFailure"} <= internal
