"""One process of the Horovod Elastic test: ``python -m tests.distributed.ft.hvd_replica OUT``.

A Horovod program as written for ``horovod.torch`` (``hvd.init``, ``DistributedOptimizer``,
``hvd.elastic.TorchState``, ``@hvd.elastic.run``, ``state.commit()`` every ``FT_COMMIT``
steps), the data set and model of ``replica.py``. ``FT_KILL_AT=s``: SIGKILL in step s.
"""
import json
import os
import signal
import sys
import time

import numpy as np

T0 = time.time()

import tensorbrain as tb  # noqa: E402
import tensorbrain.horovod as hvd  # noqa: E402
from tests.distributed.ft.replica import batch, data, model  # noqa: E402


def main(out_path):
    env = os.environ
    steps, g = int(env.get("FT_STEPS", "40")), int(env.get("FT_G", "48"))
    kill_at, every = int(env.get("FT_KILL_AT", "-1")), int(env.get("FT_COMMIT", "4"))
    pause = float(env.get("FT_PAUSE", "0.05"))
    hvd.init()
    net = model(16, int(env.get("FT_SEED", os.getpid())))
    opt = hvd.DistributedOptimizer(tb.optim.SGD(net.parameters(), lr=0.2, momentum=0.9),
                                   named_parameters=net.named_parameters())
    x, y = data()
    log = open(out_path, "a")
    log.write(json.dumps({"start": T0, "pid": os.getpid()}) + "\n")
    resets = []
    state = hvd.elastic.TorchState(net, opt, step=0)
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])

    @hvd.elastic.run
    def train(state):
        while state.step < steps:
            mine = np.array_split(batch(state.step, g), hvd.size())[hvd.rank()]
            opt.zero_grad()
            loss = tb.nn.functional.cross_entropy(net(tb.tensor(x[mine])), tb.tensor(y[mine]))
            if state.step == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            loss.backward()
            opt.step()
            log.write(json.dumps({"step": state.step, "world": hvd.size(), "rank": hvd.rank(),
                                  "loss": float(loss.item()), "t": time.time()}) + "\n")
            log.flush()
            state.step += 1
            if state.step % every == 0:
                state.commit()
            time.sleep(pause)

    train(state)
    full = float(tb.nn.functional.cross_entropy(net(tb.tensor(x)), tb.tensor(y)).item())
    log.write(json.dumps({"final": [p.detach().numpy().tolist() for p in net.parameters()],
                          "full_loss": full, "pid": os.getpid(), "resets": resets}) + "\n")
    log.close()
    hvd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
