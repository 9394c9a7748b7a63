"""The native build (CMakeLists.txt, csrc/CMakeLists.txt) does not recompile an unchanged module
when pip builds in a new isolated environment, as `pip install -e '.[extra]'` does.

What pip + scikit-build-core do between two installs is done here by hand, on our two CMake
files and a one-line pybind11 module (so the test compiles seconds, not minutes): pybind11 comes
from a new folder with new file times each time (pip's temporary environment), and the outer
tree's CMakeCache.txt and CMakeFiles/ are deleted ("New isolated environment ... clearing
cache"). Before the fix every install recompiled every file (58 s to 2 min 48 s).
"""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _tools():
    pybind11 = pytest.importorskip("pybind11")
    for tool in ("cmake", "ninja", "c++"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    return Path(pybind11.__file__).parent


def _environment(tmp, name, pybind11_pkg):
    """A fresh 'isolated environment': pybind11 copied to a new folder (new file times)."""
    site = tmp / name / "site-packages"
    shutil.copytree(pybind11_pkg, site / "pybind11")
    return site


def _build(src, build, site) -> str:
    """One install's build: scikit-build-core's cache clearing, its initial cache, configure,
    build. Returns the output."""
    (build / "CMakeCache.txt").unlink(missing_ok=True)
    shutil.rmtree(build / "CMakeFiles", ignore_errors=True)
    build.mkdir(parents=True, exist_ok=True)
    (build / "CMakeInit.txt").write_text(
        f'set(Python_EXECUTABLE [===[{sys.executable}]===] CACHE PATH "" FORCE)\n'
        f'set(CMAKE_PREFIX_PATH [===[{site}]===] CACHE PATH "" FORCE)\n')
    out = ""
    for cmd in (["cmake", "-S", str(src), "-B", str(build), "-G", "Ninja",
                 "-C", str(build / "CMakeInit.txt"), "-DCMAKE_BUILD_TYPE=Release"],
                ["cmake", "--build", str(build)]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        out += proc.stdout + proc.stderr
        assert proc.returncode == 0, out
    return out


def test_an_unchanged_module_is_not_recompiled_by_a_new_isolated_environment(tmp_path):
    pybind11_pkg = _tools()
    src = tmp_path / "src"
    (src / "csrc").mkdir(parents=True)
    shutil.copy(ROOT / "CMakeLists.txt", src / "CMakeLists.txt")
    shutil.copy(ROOT / "csrc" / "CMakeLists.txt", src / "csrc" / "CMakeLists.txt")
    module = src / "csrc" / "module.cpp"
    module.write_text("#include <pybind11/pybind11.h>\nPYBIND11_MODULE(_C, m) { m.attr(\"x\") = 1; }\n")
    build = tmp_path / "build"
    first = _build(src, build, _environment(tmp_path, "env1", pybind11_pkg))
    assert "Building CXX object CMakeFiles/_C.dir/module.cpp.o" in first
    built = list((build / "native").glob("_C*.so"))
    assert len(built) == 1
    time.sleep(1.1)  # new file times in the next environment, as pip's
    second = _build(src, build, _environment(tmp_path, "env2", pybind11_pkg))
    assert "Building CXX" not in second and "ninja: no work to do" in second, second
    os.utime(module)  # a changed source is recompiled, alone
    third = _build(src, build, _environment(tmp_path, "env3", pybind11_pkg))
    assert third.count("Building CXX") == 1 and "module.cpp.o" in third
