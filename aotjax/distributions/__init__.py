"""`aotjax.distributions`: probability distributions with PyTorch's API (`torch.distributions`), written with
aotjax's tensor ops, so `.backward()`, `aotjax.grad`, `jit` and `vmap` work through them. Samples draw from
aotjax's generator (`aotjax.manual_seed` makes them reproducible); `rsample` is differentiable with respect to the
parameters (the reparameterization trick), `sample` is not.

>>> from aotjax.distributions import Categorical, Normal, kl_divergence
>>> Normal(aotjax.zeros(2), 1.0)
Normal(loc: (2,), scale: (2,))
>>> kl_divergence(Categorical(logits=aotjax.zeros(2)), Categorical(probs=aotjax.tensor([0.5, 0.5])))
tensor(0.)
"""
from aotjax.distributions import constraints
from aotjax.distributions.bernoulli import Bernoulli
from aotjax.distributions.categorical import Categorical, OneHotCategorical
from aotjax.distributions.distribution import Distribution
from aotjax.distributions.exponential import Exponential
from aotjax.distributions.independent import Independent
from aotjax.distributions.kl import kl_divergence, register_kl
from aotjax.distributions.laplace import Laplace
from aotjax.distributions.normal import Normal
from aotjax.distributions.uniform import Uniform

__all__ = ["Bernoulli", "Categorical", "Distribution", "Exponential", "Independent", "Laplace", "Normal",
           "OneHotCategorical", "Uniform", "constraints", "kl_divergence", "register_kl"]
