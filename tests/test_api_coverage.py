"""The torch surface inventory (tensorbrain.testing.api_coverage) and CI's ratchet on it.

The ratchet: weighted coverage of the committed scan (tensorbrain/testing/api_data/usage.json)
must not drop below api_coverage.RATCHET, and the number of missing names that two or more of
the scanned repositories use must not grow past MISSING_USED_TWICE. Neither needs torch: the
scan and torch's name list are committed. The scanner's own test needs torch (it resolves names
against the installed one) and skips cleanly without it.
"""
import json
import os

import pytest

from tensorbrain.testing import api_coverage as cov

# The most missing names used by >= 2 repositories that CI allows; lower it as names are added.
MISSING_USED_TWICE = 42


@pytest.fixture(scope="module")
def statuses():
    return cov.usage_statuses(cov.load_usage())


def test_weighted_coverage_does_not_drop(statuses):
    have, total = cov.weighted(cov.load_usage(), statuses)
    assert total > 10000   # the committed scan is there and whole
    assert have / total >= cov.RATCHET, (
        f"weighted coverage {have / total:.4f} fell below the committed {cov.RATCHET}: a torch "
        f"name real programs use went missing (python -m tensorbrain.testing.api_coverage "
        f"--missing 40 lists the gaps)")


def test_names_used_twice_are_not_newly_missing(statuses):
    gaps = cov.missing(cov.load_usage(), statuses, min_repos=2)
    assert len(gaps) <= MISSING_USED_TWICE, (
        f"{len(gaps)} names used by >= 2 scanned repositories are missing (allowed "
        f"{MISSING_USED_TWICE}): {gaps[:20]}")


def test_status_tells_present_missing_and_refusing():
    assert cov.status("torch.nn.Linear") == cov.PRESENT
    assert cov.status("torch.Tensor.view") == cov.PRESENT
    assert cov.status("torch.utils.data") == cov.PRESENT          # a module
    assert cov.status("torch.nn.functional.relu") == cov.PRESENT  # through a submodule
    assert cov.status("torch.no_such_name") == cov.MISSING
    assert cov.status("torch.Tensor.no_such_method") == cov.MISSING
    assert cov.status("torch.no_such_module.x") == cov.MISSING
    assert cov.status("torch.jit.save") == cov.REFUSING
    assert cov.status("torch.nn.utils.parametrizations.orthogonal") == cov.REFUSING


def test_refusals_name_themselves_and_say_what_to_use():
    from tensorbrain._unsupported import NotSupportedError, unsupported, unsupported_class
    f = unsupported("torch.x.f", "it needs y", "z")
    with pytest.raises(NotImplementedError, match=r"^torch\.x\.f is not supported by "
                                                  r"TensorBrain: it needs y\. Use z instead$"):
        f(1, k=2)
    C = unsupported_class("torch.x.C", "it needs y")
    assert not isinstance(object(), C) and C.__module__ == "tensorbrain.x"
    with pytest.raises(NotSupportedError, match="torch.x.C is not supported"):
        C()


def test_committed_data_is_consistent():
    usage, names = cov.load_usage(), cov.load_torch_names()
    assert len(usage["repositories"]) >= 30
    assert all(len(r["commit"]) == 40 and r["files"] > 0 for r in usage["repositories"])
    n = len(usage["repositories"])
    assert all(rs and all(0 <= i < n for i in rs) for rs in usage["names"].values())
    assert set(names["modules"]) == set(cov.MODULES)
    assert len(names["modules"]["torch.Tensor"]) > 500


def test_report_and_docs_block_give_the_figures():
    text = cov.report(n_missing=5)
    assert "weighted coverage" in text and "torch.Tensor" in text
    block = cov.docs_block()
    assert block.startswith(cov.BEGIN) and block.endswith(cov.END)
    with open(cov.DOCS) as f:
        assert cov.BEGIN in f.read(), "docs/compat.md lost its generated block"


def test_write_docs_replaces_only_the_block(tmp_path):
    page = tmp_path / "compat.md"
    page.write_text(f"# head\n\n{cov.BEGIN}\nSTALE-CONTENT\n{cov.END}\n\ntail\n")
    cov.write_docs(str(page))
    text = page.read_text()
    assert text.startswith("# head\n\n" + cov.BEGIN) and text.endswith(cov.END + "\n\ntail\n")
    assert "STALE-CONTENT" not in text and "Weighted coverage" in text
    page.write_text("no markers")
    with pytest.raises(ValueError, match="no generated block"):
        cov.write_docs(str(page))


def test_the_scanner_resolves_aliases_and_counts_per_repository(tmp_path):
    pytest.importorskip("torch")
    from tensorbrain.testing._api_scan import Resolver, scan_source
    src = (
        "import os\n"
        "import torch as T\n"
        "import torch.nn as nn\n"
        "from torch.nn import functional as F\n"
        "from torch.utils.data import DataLoader\n"
        "from torch.cuda.amp import GradScaler\n"
        "x = T.zeros(3).view(3, 1)\n"
        "y = F.relu(nn.Linear(1, 1)(x))\n"
        "s = os.path.split('a/b')\n"            # an imported module's function: not Tensor.split
        "z = 'a,b'.split(',')\n"                # a str method: not counted
        "T.Tensor.add_\n"
        "T.no_such_name_in_torch\n")
    used = scan_source(src, Resolver())
    assert {"torch.zeros", "torch.Tensor.view", "torch.nn.functional.relu", "torch.nn.Linear",
            "torch.utils.data.DataLoader", "torch.cuda.amp.GradScaler", "torch.nn",
            "torch.nn.functional", "torch.utils.data", "torch.Tensor.add_"} <= used
    assert "torch.Tensor.split" not in used
    assert not any("no_such" in n for n in used)
    assert scan_source("x.view(3)\n", Resolver()) == set()   # no torch import: nothing counts
    # a whole tree: tests are left out, notebooks read
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text("import torch\ntorch.ones(1)\n")
    (tmp_path / "test_a.py").write_text("import torch\ntorch.eye(1)\n")
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": [
        {"cell_type": "code", "source": ["!pip install x\n", "import torch\n", "torch.rand(2)"]}]}))
    repo = {"name": "me/repo", "path": str(tmp_path)}
    usage = cov.scan([f"{repo['name']}={repo['path']}"])
    assert usage["repositories"][0]["name"] == "me/repo"
    assert set(usage["names"]) == {"torch.rand"}
    assert os.path.isdir(tmp_path)   # a checkout is read in place, never removed
