"""Models: the contract a model meets, the reference and null networks, TorchScript files, a model's check."""
