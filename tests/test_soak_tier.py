"""The soak tier's table (tests/conftest.py SOAK) names tests that exist, and the selection rules
hold: a listed file or test is in the tier, a test named on the command line is not left out."""
import pathlib

from tests.conftest import SOAK, _asked_for, _soak

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_entry_names_a_file_and_a_test_that_exist():
    for entry in SOAK:
        path, _, name = entry.partition("::")
        assert (ROOT / path).is_file(), f"SOAK names a missing file: {entry}"
        if name:
            assert f"def {name.split('::')[-1]}(" in (ROOT / path).read_text(encoding="utf-8"), \
                f"SOAK names a missing test: {entry}"


def test_a_listed_file_or_test_is_in_the_tier_and_nothing_else_is():
    a_file = next(k for k in SOAK if "::" not in k)
    a_test = next(k for k in SOAK if "::" in k)
    assert _soak(f"{a_file}::test_anything[case-1]")
    assert _soak(f"{a_test}[case-1]") and _soak(a_test)
    assert not _soak("tests/test_tensor.py::test_add")
    assert not _soak(f"{a_test}_and_more")


def test_a_soak_test_named_on_the_command_line_runs():
    node = "tests/compat/test_programs.py::test_x[a]"
    assert _asked_for(node, ["tests/compat"])
    assert _asked_for(node, ["tests/compat/test_programs.py"])
    assert _asked_for(node, ["tests/compat/test_programs.py::test_x"])
    assert not _asked_for(node, [])
    assert not _asked_for(node, ["tests/comp"])
    assert not _asked_for(node, ["tests/compat/test_programs.py::test_xy"])
