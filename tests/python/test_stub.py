# SPDX-License-Identifier: Apache-2.0
# The .pyi stubs against the modules: the same public names, the same
# members of each class, the same parameters (name, kind, default or not)
# of each function and method.
import ast
import importlib
import inspect
import pathlib

import pytest

import podfeed
from conftest import TOKENS

KINDS = {
    "posonly": inspect.Parameter.POSITIONAL_ONLY,
    "args": inspect.Parameter.POSITIONAL_OR_KEYWORD,
    "vararg": inspect.Parameter.VAR_POSITIONAL,
    "kwonly": inspect.Parameter.KEYWORD_ONLY,
    "kwarg": inspect.Parameter.VAR_KEYWORD,
}


def stub_of(module):
    path = pathlib.Path(module.__file__).with_suffix(".pyi")
    return ast.parse(path.read_text(), str(path))


def stub_params(fn):
    """[(name, kind, has_default)] of a stub function, self left out."""
    a = fn.args
    out = []
    positional = [(p, "posonly") for p in a.posonlyargs] + [(p, "args") for p in a.args]
    first_default = len(positional) - len(a.defaults)
    for i, (p, kind) in enumerate(positional):
        out.append((p.arg, KINDS[kind], i >= first_default))
    if a.vararg:
        out.append((a.vararg.arg, KINDS["vararg"], False))
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append((p.arg, KINDS["kwonly"], d is not None))
    if a.kwarg:
        out.append((a.kwarg.arg, KINDS["kwarg"], False))
    return [p for p in out if p[0] != "self"]


def runtime_params(obj):
    sig = inspect.signature(obj)
    return [(p.name, p.kind, p.default is not p.empty) for p in sig.parameters.values()
            if p.name != "self"]


def members(node):
    """{name: FunctionDef | None} of a stub class or module body."""
    out = {}
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.ClassDef)):
            out[item.name] = item
        elif isinstance(item, ast.AnnAssign):
            out[item.target.id] = None
    return out


def own_public(cls, instance, stubbed):
    """The public names cls, its podfeed bases without a stub of their own
    (the extension's LoaderBase) and instance define."""
    names = set()
    for klass in cls.__mro__:
        if klass is cls or (klass.__module__.startswith("podfeed")
                            and klass.__name__ not in stubbed):
            names |= {n for n in vars(klass) if not n.startswith("_")}
    if instance is not None:
        names |= {n for n in getattr(instance, "__dict__", {}) if not n.startswith("_")}
    return names


@pytest.fixture(scope="module")
def instances(data):
    loader = podfeed.Loader(data / "indexed", TOKENS, 8)
    batch = next(loader)
    inst = {"Loader": loader, "Batch": batch, "Tensor": batch.tensor("tokens"),
            "Image": podfeed.Image(8, 8)}
    try:
        pt = importlib.import_module("podfeed.torch")
        inst["IterableDataset"] = pt.IterableDataset(data / "indexed", TOKENS, 8)
    except ImportError:
        pass
    yield inst
    batch.release()
    loader.close()


@pytest.mark.parametrize("name", ["podfeed", "podfeed.torch", "podfeed.jax"])
def test_stub_matches_the_module(name, instances):
    if name == "podfeed.torch":
        pytest.importorskip("torch")
    module = importlib.import_module(name)
    tree = stub_of(module)
    stub = {n: v for n, v in members(tree).items() if not n.startswith("_")}
    if hasattr(module, "__all__"):
        public = set(module.__all__)
    else:
        public = {n for n, v in vars(module).items() if not n.startswith("_")
                  and getattr(v, "__module__", None) == name}
    assert set(stub) == public, f"{name}: stub {sorted(stub)} module {sorted(public)}"
    for sname, node in stub.items():
        obj = getattr(module, sname)
        if isinstance(node, ast.FunctionDef):
            assert stub_params(node) == runtime_params(obj), f"{name}.{sname}"
        if not isinstance(node, ast.ClassDef):
            continue
        have = members(node)
        inst = instances.get(sname)
        runtime = own_public(obj, inst, stub)
        declared = {n for n in have if not n.startswith("_")}
        assert declared == runtime, f"{name}.{sname}: stub {sorted(declared)} " \
                                    f"runtime {sorted(runtime)}"
        for mname, fn in have.items():
            assert hasattr(obj, mname) or hasattr(inst, mname), f"{sname}.{mname}"
            if fn is None:
                continue
            assert stub_params(fn) == runtime_params(getattr(obj, mname)), \
                f"{name}.{sname}.{mname}"


def test_the_stub_test_sees_a_difference():
    # The comparison itself: a parameter renamed, dropped or given a
    # default in the stub shows.
    fn = ast.parse("def f(a, b=1, *, c): ...").body[0]

    def f(a, b=1, *, c):
        pass

    def g(a, b, *, c):
        pass

    def h(a, bb=1, *, c):
        pass

    assert stub_params(fn) == runtime_params(f)
    assert stub_params(fn) != runtime_params(g)
    assert stub_params(fn) != runtime_params(h)
