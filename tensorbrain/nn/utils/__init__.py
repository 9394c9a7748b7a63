"""``tb.nn.utils``: gradient clipping and flat parameter vectors."""
from .clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters
from . import parametrizations, parametrize, rnn  # noqa: E402  (torch.nn.utils.rnn, ...)
from .weight_norm import remove_weight_norm, weight_norm
from . import prune  # noqa: E402,F401
from .spectral_norm import remove_spectral_norm, spectral_norm  # noqa: E402

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "parameters_to_vector",
           "vector_to_parameters", "rnn", "parametrizations", "parametrize", "weight_norm", "remove_weight_norm", "prune", "spectral_norm",
           "remove_spectral_norm"]
