"""Front: the notation (tokenizer, affine terms with UF calls, index expressions), SPF
relations over isl, layout files, their storage levels and how entries are written into
them, kernel specs."""
