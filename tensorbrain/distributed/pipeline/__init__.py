"""``tb.distributed.pipeline``: the tutorial's single-process GPipe, ``pipeline.sync.Pipe``.

torch removed this package in 2.4 in favour of ``torch.distributed.pipelining``
(:mod:`tensorbrain.distributed.pipelining` here); it stays for the tutorial's code.
"""
