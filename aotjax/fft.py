"""`aotjax.fft`: PyTorch's `torch.fft` namespace (discrete Fourier transforms, their frequencies and shifts), with
torch's names and arguments (`n`/`s`, `dim`, `norm`). The ops live in the op family `aotjax.ops.fft.fourier`; `stft` and
`istft` are `aotjax.stft`/`aotjax.istft`, as in torch.

>>> aotjax.fft.irfft(aotjax.fft.rfft(aotjax.tensor([1.0, 2.0, 3.0, 4.0])))
tensor([1., 2., 3., 4.])
"""
from aotjax.ops.fft.fourier import (  # noqa: F401
    FFT,
    fft,
    fft2,
    fftfreq,
    fftn,
    fftshift,
    hfft,
    hfft2,
    hfftn,
    ifft,
    ifft2,
    ifftn,
    ifftshift,
    ihfft,
    ihfft2,
    ihfftn,
    irfft,
    irfft2,
    irfftn,
    rfft,
    rfft2,
    rfftfreq,
    rfftn,
)

__all__ = list(FFT)
