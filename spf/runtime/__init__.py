"""Runtime: compiling and caching generated C (:mod:`.build`), compiled kernels and their
operands, tensors with their generated checks, tensor files."""
