"""tb.hub.load / list / help against torch.hub: the same hubconf.py from a directory
(source="local", both libraries), and a GitHub-style archive served from a file:// mirror
(TB_HUB_GITHUB; torch cannot be pointed at a mirror, so that path is checked against the local
one and against what GitHub's archive layout implies)."""
import os
import zipfile

import pytest

import tensorbrain as tb

HUBCONF = '''
dependencies = ["numpy"]

import numpy as np


def affine(scale=2.0, *, shift=1.0):
    """y = scale * x + shift, as a function."""
    return lambda x: np.asarray(x) * scale + shift


def _private():
    return None
'''


@pytest.fixture
def repo(tmp_path):
    d = tmp_path / "repo"
    d.mkdir()
    (d / "hubconf.py").write_text(HUBCONF)
    (d / "helper.py").write_text("VALUE = 7\n")   # importable from hubconf's directory
    return d


def test_local_load_matches_torch(repo):
    torch = pytest.importorskip("torch")
    for args, kwargs in (((), {}), ((3.0,), {"shift": -1.0})):
        got = tb.hub.load(str(repo), "affine", *args, source="local", **kwargs)
        want = torch.hub.load(str(repo), "affine", *args, source="local", **kwargs)
        assert got([1.0, 2.0]).tolist() == want([1.0, 2.0]).tolist()
    for bad, kind in (("nope", RuntimeError), ("dependencies", RuntimeError)):
        errors = []
        for hub in (tb.hub, torch.hub):
            with pytest.raises(kind) as e:
                hub.load(str(repo), bad, source="local")
            errors.append(str(e.value))
        assert errors[0] == errors[1]
    (repo / "hubconf.py").write_text(HUBCONF.replace('["numpy"]', '["numpy", "no_such_mod_x"]'))
    errors = []
    for hub in (tb.hub, torch.hub):
        with pytest.raises(RuntimeError) as e:
            hub.load(str(repo), "affine", source="local")
        errors.append(str(e.value))
    assert errors[0] == errors[1] == "Missing dependencies: no_such_mod_x"
    with pytest.raises(ValueError, match="Unknown source"):
        tb.hub.load(str(repo), "affine", source="s3")


def _mirror(tmp_path, repo, owner, name, ref):
    """<mirror>/<owner>/<name>/zipball/<ref>: a zip with one top directory, as GitHub serves."""
    zdir = tmp_path / "mirror" / owner / name / "zipball"
    zdir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(zdir / ref, "w") as z:
        for f in repo.iterdir():
            z.write(f, f"{owner}-{name}-abc123/{f.name}")
    return (tmp_path / "mirror").as_uri()


def test_github_source_downloads_once_into_the_hub_dir(tmp_path, repo, monkeypatch):
    base = _mirror(tmp_path, repo, "someone", "models", "master")   # no main: falls back
    monkeypatch.setenv("TB_HUB_GITHUB", base)
    old = tb.hub._hub_dir[0]
    tb.hub.set_dir(tmp_path / "hub")
    try:
        with pytest.warns(UserWarning, match="untrusted repository"):
            assert tb.hub.list("someone/models") == ["affine"]
        cached = tmp_path / "hub" / "someone_models_master"
        assert (cached / "hubconf.py").read_text() == HUBCONF
        with pytest.warns(UserWarning, match="untrusted repository"):  # not trusted yet, as torch
            assert tb.hub.help("someone/models", "affine") == \
                "y = scale * x + shift, as a function."
        fn = tb.hub.load("someone/models", "affine", 4.0, trust_repo=True)
        assert fn([1.0]).tolist() == [5.0]
        assert "someone_models" in (tmp_path / "hub" / "trusted_list").read_text()
        (cached / "hubconf.py").write_text(HUBCONF.replace("* scale", "* scale * 10"))
        assert tb.hub.load("someone/models", "affine", trust_repo=True)([1.0]).tolist() == [21.0]
        assert tb.hub.load("someone/models", "affine", trust_repo=True,
                           force_reload=True)([1.0]).tolist() == [3.0]
        _mirror(tmp_path, repo, "someone", "models", "v1.0")
        assert tb.hub.load("someone/models:v1.0", "affine", trust_repo=True)([0.0]).tolist() \
            == [1.0]
        assert os.listdir(tmp_path / "hub") and not any(
            n.endswith((".zip", ".extract")) for n in os.listdir(tmp_path / "hub"))
        monkeypatch.setattr("builtins.input", lambda prompt: "n")
        with pytest.raises(Exception, match="Untrusted repository"):
            tb.hub.load("other/models:v1.0", "affine", trust_repo="check")
        with pytest.raises(ValueError, match="repo_owner/repo_name"):
            tb.hub.load("justaname", "affine")
    finally:
        tb.hub._hub_dir[0] = old
