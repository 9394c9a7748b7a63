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


def test_docs_page_names_become_links(pkg):
    ddp = pkg["nn.parallel"]["DistributedDataParallel"].docstring.value
    assert "[docs/ddp.md](../ddp.md)" in ddp
    links = _extension("griffe_doctests").link_pages
    assert links("``docs/no-such-page.md``") == "``docs/no-such-page.md``"  # only real pages


def test_collective_parameters_get_their_types():
    types = _extension("griffe_types")
    ext = griffe.load_extensions(types.CollectiveTypes())
    pkg = griffe.load("tensorbrain.distributed", search_paths=[str(ROOT)], extensions=ext,
                      docstring_parser=griffe.Parser.google)
    missing = []
    for mod in ("_collectives", "_p2p", "_object_collectives"):
        for name, fn in pkg[mod].members.items():
            if name.startswith("_") or fn.is_alias or not fn.is_function or fn.docstring is None:
                continue
            documented = {p.name: p.annotation for s in fn.docstring.parsed
                          if s.kind.value == "parameters" for p in s.value}
            for p in fn.parameters:
                if p.name not in ("self",) and not documented.get(p.name):
                    missing.append(f"{mod}.{name}({p.name})")
    assert not missing, f"parameters without a type on the API reference: {missing}"


@pytest.mark.slow
def test_the_built_site_in_headless_chromium(tmp_path):
    """The DDP reference (typed Parameters, formatted signature, source, a real link) and every
    page's layout (no cut-off table, the TOC on the right, a short nav), measured in Chromium;
    screenshots of the DDP reference are written next to the built site."""
    import shutil
    import subprocess
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no chromium (Debian: apt-get install chromium)")
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d",
                           str(site)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    failures = _extension("check_site").check(str(site), str(tmp_path / "shots"), chromium)
    assert not failures, failures
    assert (tmp_path / "shots" / "ddp.png").read_bytes()[:4] == b"\x89PNG"
