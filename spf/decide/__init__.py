"""Decisions: the Z3 encoding of a nest, find synthesis (with :mod:`spf.finds`), dependence
and tiling analysis, the plan of a kernel (with :mod:`spf.assembly`), its options."""
