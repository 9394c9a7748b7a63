"""Polynomial regression with manual SGD through ``p.data`` (the shape of pytorch/examples
regression/main.py): no optimizer, updates on ``.data``, losses printed with ``f"{loss:.4f}"``."""
import numpy as np
import torch
import torch.nn.functional as F

POLY_DEGREE = 4
W_target = torch.tensor([[0.5], [-1.0], [0.3], [0.8]])
b_target = torch.tensor([0.7])


def make_features(x):
    """Builds features i.e. a matrix with columns [x, x^2, x^3, x^4]."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x):
    """Approximated function."""
    return x.mm(W_target) + b_target.item()


def poly_desc(W, b):
    result = "y = "
    for i, w in enumerate(W):
        result += "{:+.2f} x^{} ".format(w, i + 1)
    result += "{:+.2f}".format(b[0])
    return result


def get_batch(rng, batch_size=32):
    random = torch.from_numpy(rng.standard_normal(batch_size).astype(np.float32))
    x = make_features(random)
    y = f(x)
    return x, y


def main():
    rng = np.random.default_rng(0)
    fc = torch.nn.Linear(W_target.size(0), 1)
    fc.weight.data.fill_(0.0)
    fc.bias.data.zero_()
    for batch_idx in range(1, 501):
        batch_x, batch_y = get_batch(rng)
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        for param in fc.parameters():
            param.data.add_(param.grad.data, alpha=-0.05)
        if batch_idx % 100 == 0:
            print(f"batch {batch_idx} loss {output:.4f}")
    print("Loss: {:.6f} after {} batches".format(loss, batch_idx))
    print("==> Learned function:\t" + poly_desc(fc.weight.view(-1), fc.bias))
    print("==> Actual function:\t" + poly_desc(W_target.view(-1), b_target))
    print(f"FINAL_LOSS {loss:.6f}")


if __name__ == "__main__":
    main()
