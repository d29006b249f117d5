"""The ops of `torch.nn.functional`, by subject: activations (softmax included), losses, normalization and dropout,
convolution, pooling, resampling and padding, linear layers, embedding (torch's sparse layers), attention. Each
module lists its `torch.nn.functional` names in `FUNCTIONAL`."""
