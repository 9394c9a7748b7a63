"""The docs site's griffe extensions (docs/_ext): the API reference shows what users reach.

Needs griffe (the ``docs`` extra: mkdocstrings[python]); skipped without it. CI builds the site
with ``mkdocs build --strict`` after the tests; these checks say *what* the pages would miss.
"""
import importlib.util
import pathlib
import sys

import pytest

griffe = pytest.importorskip("griffe")
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _extension(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "_ext" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pkg():
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    doctests, runtime = _extension("griffe_doctests"), _extension("griffe_runtime")
    extensions = griffe.load_extensions(doctests.DoctestExamples(), runtime.RuntimeMembers())
    return griffe.load("tensorbrain", search_paths=[str(ROOT)], extensions=extensions,
                       docstring_parser=griffe.Parser.google)


def test_tensor_page_has_the_class_the_op_methods_and_the_factories(pkg):
    module = pkg["tensor"]
    for name in ("Tensor", "Size", "zeros", "zeros_like", "randn"):
        assert module[name].is_public, name
    tensor = module["Tensor"]
    # written in the class body, installed from tensor.py, made from the op table, in-place
    for name in ("item", "to", "backward", "add", "sum", "reshape", "matmul", "abs_", "new_zeros"):
        assert name in tensor.members and tensor[name].docstring is not None, name
    # an op as a method: the tensor is self, not a parameter
    add = tensor["add"]
    assert [p.name for p in add.parameters][:2] == ["self", "b"]
    assert "    a: " not in add.docstring.value


def test_top_level_page_has_the_ops_and_the_re_exports(pkg):
    for name in ("add", "matmul", "softmax", "zeros_like", "no_grad", "manual_seed", "is_tensor"):
        member = pkg[name]
        assert member.is_public and member.docstring is not None, name
    assert pkg["add"].docstring.value.startswith("Elementwise ``a + alpha * b``")


def test_lazy_and_starred_exports_are_shown(pkg):
    assert pkg["nn"]["LSTM"].is_public            # __all__ = [..., *_modules_all]
    assert pkg["nn"]["DataParallel"].is_public    # module __getattr__
    assert pkg["utils.data"]["DistributedSampler"].is_public
    assert pkg["nn.functional"]["max_pool2d"].docstring is not None


def test_sphinx_roles_become_code_spans(pkg):
    doc = pkg["tensor"].docstring.value
    assert ":func:" not in doc and "`zeros`" in doc
