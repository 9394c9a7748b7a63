"""optimizer.state as torch's defaultdict(dict), and state a program stores itself (the A3C
SharedAdam idiom): used in place by the built-in step, shared across processes when shared."""
import collections
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorbrain as tb

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _problem():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 3)).astype(np.float32)
    return tb.from_numpy(x), tb.from_numpy(x @ np.array([[1.0], [-2.0], [0.5]], np.float32))


def _adam_run(prefill, steps=5):
    tb.manual_seed(0)
    m = tb.nn.Linear(3, 1)
    opt = tb.optim.Adam(m.parameters(), lr=0.1)
    if prefill:  # as MorvanZhou's SharedAdam: state made by the program, step a tensor
        for group in opt.param_groups:
            for p in group["params"]:
                state = opt.state[p]
                state["step"] = tb.zeros(1)
                state["exp_avg"] = tb.zeros_like(p.data)
                state["exp_avg_sq"] = tb.zeros_like(p.data)
    x, y = _problem()
    for _ in range(steps):
        opt.zero_grad()
        tb.nn.functional.mse_loss(m(x), y).backward()
        opt.step()
    return m, opt


def test_state_is_a_defaultdict_keyed_by_parameter():
    m = tb.nn.Linear(2, 1)
    opt = tb.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    assert isinstance(opt.state, collections.defaultdict)
    assert opt.state[m.weight] == {}          # no KeyError, as torch
    m(tb.ones(1, 2)).sum().backward()
    opt.step()
    assert set(opt.state[m.weight]) >= {"momentum_buffer"}
    sd = opt.state_dict()                      # the empty entry read above does not get in the way
    opt2 = tb.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    opt2.load_state_dict(sd)
    assert isinstance(opt2.state, collections.defaultdict)
    np.testing.assert_array_equal(opt2.state[m.weight]["momentum_buffer"],
                                  opt.state[m.weight]["momentum_buffer"])


def test_state_tensors_a_program_stores_are_updated_in_place():
    ref, _ = _adam_run(prefill=False)
    m, opt = _adam_run(prefill=True)
    np.testing.assert_allclose(m.weight.detach().numpy(), ref.weight.detach().numpy(), rtol=1e-6)
    # the program's own tensors hold the state: step counter 5, moments non-zero
    m2 = tb.nn.Linear(3, 1)
    opt2 = tb.optim.Adam(m2.parameters(), lr=0.1)
    step, avg = tb.zeros(1), tb.zeros_like(m2.weight.data)
    opt2.state[m2.weight].update(step=step, exp_avg=avg, exp_avg_sq=tb.zeros_like(m2.weight.data))
    m2(tb.ones(2, 3)).sum().backward()
    opt2.step()
    opt2.step()
    assert step.tolist() == [2.0] and float(avg.abs().sum()) > 0
    assert opt.state_dict()["state"][0]["exp_avg"].shape == m.weight.shape


def test_shared_adam_across_processes():
    """Two A3C-style workers step one shared model with one shared Adam: the shared step
    counter counts both workers' steps and the loss falls."""
    code = textwrap.dedent("""
        import tensorbrain as tb, tensorbrain.multiprocessing as mp
        from tests.multiprocessing import _workers as W
        from tests.optim.test_optim_state import _problem
        if __name__ == '__main__':
            x, y = _problem()
            tb.manual_seed(0)
            model = tb.nn.Linear(3, 1)
            model.share_memory()
            opt = tb.optim.Adam(model.parameters(), lr=0.05)
            for p in model.parameters():
                st = opt.state[p]
                st['step'] = tb.zeros(1).share_memory_()
                st['exp_avg'] = tb.zeros_like(p.data).share_memory_()
                st['exp_avg_sq'] = tb.zeros_like(p.data).share_memory_()
            loss0 = tb.nn.functional.mse_loss(model(x), y).item()
            mp.spawn(W.shared_adam_steps, args=(model, opt, x, y, 40), nprocs=2)
            steps = opt.state[model.weight]['step']
            print(float(steps[0]), loss0, tb.nn.functional.mse_loss(model(x), y).item())
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    steps, loss0, loss1 = map(float, out.stdout.split())
    # both workers' steps, counted in shared memory (hogwild: an increment can race another and
    # be lost, as in torch, so not necessarily all 80; one worker alone would give 40)
    assert 60 < steps <= 80
    assert loss1 < 0.2 * loss0


def test_swap_in_optimizer_params_and_state_matches_torch():
    """Adam stepped on swapped-in parameters and state: the same updates as torch's, the
    state tensors updated in the caller's dict, the live optimizer untouched afterwards."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    w0, b0 = rng.standard_normal((3, 2)), rng.standard_normal(3)
    res = []
    for lib in (tb, torch):
        lin = lib.nn.Linear(2, 3).double()
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(w0))
            lin.bias.copy_(lib.tensor(b0))
        opt = lib.optim.Adam(lin.parameters(), lr=0.1)
        lin(lib.ones(4, 2, dtype=lib.float64)).pow(2).sum().backward()
        opt.step()
        live = [p.detach().clone() for p in lin.parameters()]
        osd = opt.state_dict()
        osd = {"state": {k: {n: (v.clone() if hasattr(v, "clone") else v) for n, v in s.items()}
                         for k, s in osd["state"].items()},
               "param_groups": [dict(g, lr=0.5) for g in osd["param_groups"]]}
        swap = {n: p.detach().clone() * 2 for n, p in lin.named_parameters()}
        for p in swap.values():
            p.grad = lib.ones_like(p)
        with lib.optim.swap_in_optimizer_params_and_state(opt, swap, osd):
            assert opt.param_groups[0]["lr"] == 0.5
            opt.step()
        assert opt.param_groups[0]["lr"] == 0.1
        for p, q in zip(lin.parameters(), live):
            assert np.array_equal(p.detach().numpy(), q.numpy())
        res.append([swap["weight"].numpy(), swap["bias"].numpy(),
                    np.asarray(osd["state"][0]["exp_avg"]), np.asarray(osd["state"][1]["exp_avg_sq"])])
        with pytest.raises(RuntimeError, match="swap_in_optimizer_params_and_state requires"):
            with lib.optim.swap_in_optimizer_params_and_state(opt, swap, {"state": 1}):
                pass
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12)
