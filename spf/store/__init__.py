"""The write side of layouts: entries written into any layout whose relation says where each
entry goes, by generated C.

:mod:`spf.front.writing` solves a layout's relation into a :class:`~spf.front.writing.WritePlan`
(which coordinates give which layout indices, which indices are ranks within groups, which
arrays are counts and prefix sums, permutations, runs, markers, padding, derived fields);
:mod:`spf.store.lower` lowers that plan to one C function through the C tree: each decision
becomes a pass over the entry list (counts, prefix sums, ranks, stores), every field of the
destination is allocated and written, and every constraint of the relation is checked per
entry.  Conversions (:mod:`spf.conversion`) run its passes inside the source's own loops where
those visit each entry once (a :class:`~spf.store.lower.Visit`), else after the
generated code that reads the source into an entry list; kernel outputs and tensors built from
entries call it on theirs.
"""
from .lower import Refusal, Visit, WriterSource, visitable, writer_file, writer_source

__all__ = ["Refusal", "Visit", "WriterSource", "visitable", "writer_file", "writer_source"]
