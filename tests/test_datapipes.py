"""tb.utils.data.datapipes against torch's: the same pipelines give the same items (the
Shuffler with a seed gives torch's order), file listing and opening, functional_datapipe and
apply_shuffle_settings."""
import pytest

import tensorbrain as tb
from tensorbrain.utils.data import IterDataPipe, functional_datapipe, graph_settings
from tensorbrain.utils.data.datapipes import iter as dpi
from tensorbrain.utils.data.datapipes.iter.combinatorics import ShufflerIterDataPipe


def _pipelines(it):
    src = list(range(23))
    return {
        "map_filter_batch": it.IterableWrapper(src).map(lambda x: x * 3)
        .filter(lambda x: x % 2 == 0).batch(4),
        "drop_last": it.IterableWrapper(src).batch(5, drop_last=True),
        "shuffle": it.IterableWrapper(src).shuffle(buffer_size=7).set_seed(11),
        "shuffle_all": it.IterableWrapper(src).shuffle().set_seed(3),
        "unbatch": it.IterableWrapper([[1, [2, 3]], [4]]).unbatch(),
        "unbatch_all": it.IterableWrapper([[1, [2, 3]], [4]]).unbatch(-1),
        "concat_zip": it.IterableWrapper([1, 2]).concat(it.IterableWrapper([3]))
        .zip(it.IterableWrapper("abc")),
        "map_cols": it.IterableWrapper([(1, 2), (3, 4)]).map(lambda a: a * 10, input_col=1),
    }


def test_pipelines_match_torch():
    pytest.importorskip("torch")
    import torch.utils.data.datapipes.iter as tit
    ours, theirs = _pipelines(dpi), _pipelines(tit)
    for name in ours:
        got = [list(b) if isinstance(b, list) else b for b in ours[name]]
        want = [list(b) if isinstance(b, list) else b for b in theirs[name]]
        assert got == want, name
    for name in ("map_filter_batch", "drop_last"):
        assert isinstance(next(iter(ours[name])), tb.utils.data.DataChunk)
    assert len(ours["drop_last"]) == len(theirs["drop_last"]) == 4
    assert len(ours["concat_zip"]) == len(theirs["concat_zip"]) == 3


def test_files_match_torch(tmp_path):
    pytest.importorskip("torch")
    import torch.utils.data.datapipes.iter as tit
    (tmp_path / "sub").mkdir()
    for name in ("b.txt", "a.txt", "c.png", "sub/d.txt"):
        (tmp_path / name).write_text(name.upper())
    for kwargs in ({"masks": "*.txt"}, {"masks": ["*.txt", "*.png"], "recursive": True}, {}):
        assert list(dpi.FileLister(str(tmp_path), **kwargs)) == \
            list(tit.FileLister(str(tmp_path), **kwargs))
    ours = [(p, f.read()) for p, f in dpi.FileOpener(dpi.FileLister(str(tmp_path), "*.txt"))]
    theirs = [(p, f.read()) for p, f in tit.FileOpener(tit.FileLister(str(tmp_path), "*.txt"))]
    assert ours == theirs and ours[0][1] == "A.TXT"
    with pytest.raises(ValueError, match="Invalid mode w"):
        dpi.FileOpener([], mode="w")


def test_functional_registration_shuffle_settings_and_dataloader():
    @functional_datapipe("tb_test_square")
    class Square(IterDataPipe):
        def __init__(self, dp):
            self.dp = dp

        def __iter__(self):
            return (x * x for x in self.dp)
    with pytest.raises(Exception, match="already taken"):
        functional_datapipe("tb_test_square")(Square)
    pipe = dpi.IterableWrapper(range(6)).shuffle().tb_test_square()
    off = graph_settings.apply_shuffle_settings(pipe, shuffle=False)
    assert off is pipe and list(pipe) == [0, 1, 4, 9, 16, 25]
    plain = dpi.IterableWrapper(range(50))
    with pytest.warns(UserWarning, match="does not contain a `Shuffler`"):
        shuffled = graph_settings.apply_shuffle_settings(plain, shuffle=True)
    assert isinstance(shuffled, ShufflerIterDataPipe)
    assert sorted(shuffled) == list(range(50)) and list(shuffled) != list(range(50))
    loader = tb.utils.data.DataLoader(dpi.IterableWrapper(range(6)), batch_size=4)
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 5]]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        plain.nope()
