"""A two-layer graph convolutional network in the shape of the public GCN code (Kipf's pygcn):
a normalised sparse adjacency built with the legacy ``torch.sparse.FloatTensor``, features and
labels through ``torch.FloatTensor`` / ``torch.LongTensor``, ``torch.spmm`` in the layers,
parameters made with ``Parameter(torch.FloatTensor(i, o))`` and ``uniform_`` in
``reset_parameters``, ``.type_as`` / ``.type()`` / ``isinstance(x, torch.FloatTensor)``.

The graph is synthetic (two communities, drawn with NumPy). ``--deterministic`` sets the
weights from NumPy after ``reset_parameters`` and turns dropout off, so torch and TensorBrain
must reach the same loss.
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parameter import Parameter


def make_graph(rng, n=120, n_feat=16, n_class=3):
    labels = rng.integers(0, n_class, n)
    centers = rng.standard_normal((n_class, n_feat))
    features = centers[labels] + 0.8 * rng.standard_normal((n, n_feat))
    same = labels[:, None] == labels[None, :]
    p = np.where(same, 0.08, 0.01)
    adj = np.triu(rng.random((n, n)) < p, 1)
    adj = (adj | adj.T).astype(np.float32)
    return features.astype(np.float32), labels, adj


def normalize(mx):
    """Row-normalise a matrix (pygcn's ``normalize``, on a dense NumPy array here)."""
    rowsum = mx.sum(1)
    r_inv = np.where(rowsum > 0, 1.0 / np.where(rowsum > 0, rowsum, 1), 0.0)
    return mx * r_inv[:, None]


def sparse_mx_to_torch_sparse_tensor(mx):
    """A dense NumPy adjacency as a torch sparse tensor (pygcn builds it from scipy's COO)."""
    rows, cols = np.nonzero(mx)
    indices = torch.from_numpy(np.vstack((rows, cols)).astype(np.int64))
    values = torch.from_numpy(mx[rows, cols].astype(np.float32))
    shape = torch.Size(mx.shape)
    return torch.sparse.FloatTensor(indices, values, shape)


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(torch.FloatTensor(in_features, out_features))
        if bias:
            self.bias = Parameter(torch.FloatTensor(out_features))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / np.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.spmm(adj, support)
        return output + self.bias if self.bias is not None else output


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


def accuracy(output, labels):
    preds = output.max(1)[1].type_as(labels)
    correct = preds.eq(labels).double()
    return correct.sum() / len(labels)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--deterministic", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(42)
    rng = np.random.default_rng(0)
    features, labels, adj = make_graph(rng)
    adj = normalize(adj + np.eye(adj.shape[0], dtype=np.float32))
    features = torch.FloatTensor(normalize(features - features.min()))
    labels = torch.LongTensor(labels)
    adj = sparse_mx_to_torch_sparse_tensor(adj)
    assert isinstance(features, torch.FloatTensor) and labels.type() == "torch.LongTensor"
    assert adj.is_sparse and adj._nnz() == adj.coalesce().values().shape[0]
    dense_check = torch.sparse.mm(adj, torch.eye(adj.shape[1]))
    assert torch.allclose(dense_check, adj.to_dense())
    idx_train, idx_val = torch.LongTensor(range(0, 80)), torch.LongTensor(range(80, 120))

    model = GCN(nfeat=features.shape[1], nhid=16, nclass=int(labels.max()) + 1,
                dropout=0.0 if args.deterministic else 0.5)
    if args.deterministic:
        wrng = np.random.default_rng(1)
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.from_numpy(wrng.uniform(-0.25, 0.25, tuple(p.shape))
                                         .astype(np.float32)))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4, fused=True)
    for epoch in range(args.epochs):
        model.train()
        optimizer.zero_grad()
        output = model(features, adj)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        acc_train = accuracy(output[idx_train], labels[idx_train])
        loss_train.backward()
        optimizer.step()
        if (epoch + 1) % 20 == 0:
            model.eval()
            output = model(features, adj)
            loss_val = F.nll_loss(output[idx_val], labels[idx_val])
            acc_val = accuracy(output[idx_val], labels[idx_val])
            print(f"Epoch: {epoch + 1:04d} loss_train: {loss_train.item():.4f} acc_train: "
                  f"{acc_train.item():.4f} loss_val: {loss_val.item():.4f} acc_val: "
                  f"{acc_val.item():.4f}")
    print(f"FINAL_LOSS {loss_train.item():.6f}")


if __name__ == "__main__":
    main()
