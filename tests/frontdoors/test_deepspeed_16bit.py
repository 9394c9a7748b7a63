"""``engine.save_16bit_model`` (DeepSpeed's way to get the whole model out of ZeRO 2/3, where
``engine.module.state_dict()`` is this rank's flat shard): at 2 ranks with each ZeRO stage it
writes the weights one process reaches on the full batch, under the model's own names."""
import pytest

from ._run import assert_close, run, weights

pytestmark = pytest.mark.timeout(300)

PROGRAM = '''
import sys
import numpy as np
import tensorbrain as torch
import tensorbrain.nn.functional as F
import tensorbrain.deepspeed as deepspeed

stage, out, freeze = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "freeze"
deepspeed.init_distributed()
torch.manual_seed(0)
rng = np.random.default_rng(5)
data = torch.utils.data.TensorDataset(
    torch.tensor(rng.standard_normal((32, 5)).astype(np.float32)),
    torch.tensor(rng.integers(0, 3, 32)))
model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
model[0].bias.requires_grad_(not freeze)
config = {"train_batch_size": 8, "gradient_accumulation_steps": 2,
          "optimizer": {"type": "AdamW", "params": {"lr": 0.02}},
          "zero_optimization": {"stage": stage}}
engine, _, loader, _ = deepspeed.initialize(
    model=model, model_parameters=[p for p in model.parameters() if p.requires_grad],
    config=config, training_data=data)
for x, y in loader:
    engine.backward(F.cross_entropy(engine(x), y))
    engine.step()
engine.save_16bit_model(out, "all.bin")
engine.save_16bit_model(out, "trained.bin", exclude_frozen_parameters=True)
'''


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    folder = tmp_path_factory.mktemp("one")
    prog = folder / "prog.py"
    prog.write_text(PROGRAM)
    for freeze in ("freeze", "train"):
        run(str(prog), "0", str(folder / freeze), freeze, alias=False)
    return prog, folder


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_save_16bit_model_at_two_ranks_matches_one_process(tmp_path, reference, stage):
    prog, one = reference
    freeze = "freeze" if stage < 3 else "train"   # ZeRO-3 refuses frozen parameters (below)
    run(str(prog), str(stage), str(tmp_path / "out"), freeze, nproc=2, alias=False)
    full = weights(tmp_path / "out" / "all.bin")
    assert sorted(full) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert_close(weights(one / freeze / "all.bin"), full)
    trained = weights(tmp_path / "out" / "trained.bin")
    kept = ["0.weight", "2.bias", "2.weight"] if freeze == "freeze" else sorted(full)
    assert sorted(trained) == kept
    assert_close(weights(one / freeze / "trained.bin"), trained)


def test_zero_3_with_frozen_parameters_is_a_clear_error(tmp_path, reference):
    prog, _ = reference
    with pytest.raises(AssertionError, match="cannot mix frozen parameters"):
        run(str(prog), "3", str(tmp_path / "out"), "freeze", nproc=2, alias=False)
