"""Fourier transforms: `torch.fft` and the short-time transforms `stft`/`istft` (`fourier`)."""
