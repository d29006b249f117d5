"""The loss layers of `torch.nn` (and `CosineSimilarity`, `PairwiseDistance`): each calls its
`aotjax.nn.functional` form with the arguments it was built with; class weights are buffers, as in PyTorch."""
from __future__ import annotations

from aotjax.nn.module import Module
from aotjax.ops.nn import losses as L
from aotjax.ops.nn.losses import cross_entropy, mse_loss

__all__ = ["CTCLoss", "TripletMarginWithDistanceLoss", "MultiLabelMarginLoss", "CrossEntropyLoss", "NLLLoss",
           "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "BCEWithLogitsLoss", "KLDivLoss",
           "CosineSimilarity", "PairwiseDistance", "CosineEmbeddingLoss", "MarginRankingLoss", "HingeEmbeddingLoss",
           "TripletMarginLoss", "SoftMarginLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss", "PoissonNLLLoss",
           "GaussianNLLLoss"]


class _Loss(Module):
    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, reduction: str = "mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """`cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)`: logits against class
    indices or class probabilities.

    >>> loss = aotjax.nn.CrossEntropyLoss()
    >>> round(loss(aotjax.zeros(2, 2), aotjax.tensor([0, 1])).item(), 4)
    0.6931
    """

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(weight, reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input, target):
        return cross_entropy(input, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """`nll_loss(input, target, weight, ignore_index, reduction)`: log-probabilities against class indices.

    >>> aotjax.nn.NLLLoss()(aotjax.tensor([[-1.0, -2.0]]), aotjax.tensor([1]))
    tensor(2.)
    """

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return L.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class MSELoss(_Loss):
    """The squared error.

    >>> aotjax.nn.MSELoss()(aotjax.tensor([1.0, 2.0]), aotjax.tensor([1.0, 4.0]))
    tensor(2.)
    """

    def forward(self, input, target):
        return mse_loss(input, target, self.reduction)


class L1Loss(_Loss):
    """The absolute error.

    >>> aotjax.nn.L1Loss()(aotjax.tensor([1.0, 2.0]), aotjax.tensor([1.0, 4.0]))
    tensor(1.)
    """

    def forward(self, input, target):
        return L.l1_loss(input, target, self.reduction)


class SmoothL1Loss(_Loss):
    """Squared error below `beta`, absolute error above.

    >>> aotjax.nn.SmoothL1Loss()(aotjax.tensor([0.0]), aotjax.tensor([3.0]))
    tensor(2.5)
    """

    def __init__(self, reduction: str = "mean", beta: float = 1.0):
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input, target):
        return L.smooth_l1_loss(input, target, self.reduction, self.beta)


class HuberLoss(_Loss):
    """Squared error below `delta`, `delta` times the absolute error above.

    >>> aotjax.nn.HuberLoss(delta=2.0)(aotjax.tensor([0.0]), aotjax.tensor([3.0]))
    tensor(4.)
    """

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input, target):
        return L.huber_loss(input, target, self.reduction, self.delta)


class BCELoss(_WeightedLoss):
    """The binary cross entropy of probabilities.

    >>> round(aotjax.nn.BCELoss()(aotjax.tensor([0.5]), aotjax.tensor([1.0])).item(), 4)
    0.6931
    """

    def forward(self, input, target):
        return L.binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_Loss):
    """The binary cross entropy of logits (sigmoid included), `pos_weight` weighing the positive term.

    >>> round(aotjax.nn.BCEWithLogitsLoss()(aotjax.tensor([0.0]), aotjax.tensor([1.0])).item(), 4)
    0.6931
    """

    def __init__(self, weight=None, reduction: str = "mean", pos_weight=None):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return L.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction, self.pos_weight)


class KLDivLoss(_Loss):
    """The KL divergence of log-probabilities `input` from `target`.

    >>> aotjax.nn.KLDivLoss(reduction="batchmean")(aotjax.tensor([[0.0]]), aotjax.tensor([[1.0]]))
    tensor(0.)
    """

    def __init__(self, reduction: str = "mean", log_target: bool = False):
        super().__init__(reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return L.kl_div(input, target, self.reduction, self.log_target)


class CosineSimilarity(Module):
    """The cosine of the angle between `x1` and `x2` along `dim`.

    >>> aotjax.nn.CosineSimilarity(dim=0)(aotjax.tensor([1.0, 0.0]), aotjax.tensor([1.0, 0.0]))
    tensor(1.)
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return L.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """The `p`-norm of `x1 - x2 + eps` along the last dim.

    >>> aotjax.nn.PairwiseDistance(eps=0.0)(aotjax.tensor([[3.0, 0.0]]), aotjax.tensor([[0.0, 4.0]]))
    tensor([5.])
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return L.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class CosineEmbeddingLoss(_Loss):
    """`1 - cos(x1, x2)` for `y == 1`, `max(0, cos(x1, x2) - margin)` for `y == -1`.

    >>> aotjax.nn.CosineEmbeddingLoss()(aotjax.tensor([[1.0, 0.0]]), aotjax.tensor([[1.0, 0.0]]), aotjax.tensor([1]))
    tensor(0.)
    """

    def __init__(self, margin: float = 0.0, reduction: str = "mean"):
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return L.cosine_embedding_loss(input1, input2, target, self.margin, self.reduction)


class MarginRankingLoss(_Loss):
    """`max(0, -y * (x1 - x2) + margin)`.

    >>> aotjax.nn.MarginRankingLoss()(aotjax.tensor([2.0]), aotjax.tensor([1.0]), aotjax.tensor([1.0]))
    tensor(0.)
    """

    def __init__(self, margin: float = 0.0, reduction: str = "mean"):
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return L.margin_ranking_loss(input1, input2, target, self.margin, self.reduction)


class HingeEmbeddingLoss(_Loss):
    """`x` for `y == 1`, `max(0, margin - x)` for `y == -1`.

    >>> aotjax.nn.HingeEmbeddingLoss()(aotjax.tensor([0.5]), aotjax.tensor([-1.0]))
    tensor(0.5)
    """

    def __init__(self, margin: float = 1.0, reduction: str = "mean"):
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input, target):
        return L.hinge_embedding_loss(input, target, self.margin, self.reduction)


class TripletMarginLoss(_Loss):
    """`max(0, margin + d(anchor, positive) - d(anchor, negative))`.

    >>> a = aotjax.tensor([[0.0, 0.0]])
    >>> aotjax.nn.TripletMarginLoss(eps=0.0)(a, a, aotjax.tensor([[3.0, 4.0]]))
    tensor(0.)
    """

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 reduction: str = "mean"):
        super().__init__(reduction)
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return L.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps, self.swap,
                                     self.reduction)


class SoftMarginLoss(_Loss):
    """`log(1 + exp(-y * x))`.

    >>> round(aotjax.nn.SoftMarginLoss()(aotjax.tensor([0.0]), aotjax.tensor([1.0])).item(), 4)
    0.6931
    """

    def forward(self, input, target):
        return L.soft_margin_loss(input, target, self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """The binary cross entropy of `sigmoid(x)` against 0/1 targets, averaged over the classes.

    >>> round(aotjax.nn.MultiLabelSoftMarginLoss()(aotjax.zeros(1, 2), aotjax.tensor([[1.0, 0.0]])).item(), 4)
    0.6931
    """

    def forward(self, input, target):
        return L.multilabel_soft_margin_loss(input, target, self.weight, self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """The multi-class hinge loss.

    >>> aotjax.nn.MultiMarginLoss()(aotjax.tensor([[0.0, 1.0]]), aotjax.tensor([1]))
    tensor(0.)
    """

    def __init__(self, p: int = 1, margin: float = 1.0, weight=None, reduction: str = "mean"):
        super().__init__(weight, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        self.p, self.margin = p, margin

    def forward(self, input, target):
        return L.multi_margin_loss(input, target, self.p, self.margin, self.weight, self.reduction)


class PoissonNLLLoss(_Loss):
    """The Poisson negative log likelihood.

    >>> aotjax.nn.PoissonNLLLoss()(aotjax.tensor([0.0]), aotjax.tensor([1.0]))
    tensor(1.)
    """

    def __init__(self, log_input: bool = True, full: bool = False, eps: float = 1e-8, reduction: str = "mean"):
        super().__init__(reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return L.poisson_nll_loss(log_input, target, self.log_input, self.full, self.eps, self.reduction)


class GaussianNLLLoss(_Loss):
    """The Gaussian negative log likelihood of `target` under mean `input` and variance `var`.

    >>> aotjax.nn.GaussianNLLLoss()(aotjax.tensor([1.0]), aotjax.tensor([1.0]), aotjax.tensor([1.0]))
    tensor(0.)
    """

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__(reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return L.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)


class CTCLoss(_Loss):
    """`ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity)`.

    >>> lp = aotjax.tensor([[[0.5, 0.5]], [[0.5, 0.5]]]).log()
    >>> aotjax.nn.CTCLoss(reduction="sum")(lp, aotjax.tensor([[1]]), [2], [1])
    tensor(0.2876821)
    """

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return L.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                          self.zero_infinity)


class TripletMarginWithDistanceLoss(_Loss):
    """`triplet_margin_with_distance_loss(anchor, positive, negative, ...)` with a distance function.

    >>> a = aotjax.tensor([[0.0, 0.0]])
    >>> aotjax.nn.TripletMarginWithDistanceLoss(distance_function=lambda x, y: (x - y).abs().sum(-1))(a, a, a + 2)
    tensor(0.)
    """

    def __init__(self, *, distance_function=None, margin: float = 1.0, swap: bool = False, reduction: str = "mean"):
        super().__init__(reduction)
        self.distance_function, self.margin, self.swap = distance_function, margin, swap

    def forward(self, anchor, positive, negative):
        return L.triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=self.distance_function,
                                                   margin=self.margin, swap=self.swap, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """`multilabel_margin_loss(input, target, reduction)`.

    >>> aotjax.nn.MultiLabelMarginLoss()(aotjax.tensor([[0.125, 0.25, 0.5, 1.0]]), aotjax.tensor([[3, 0, -1, 1]]))
    tensor(0.8125)
    """

    def forward(self, input, target):
        return L.multilabel_margin_loss(input, target, self.reduction)
