"""Front: the notation (tokenizer, affine terms with UF calls, index expressions), SPF
relations over isl, layout files and their storage levels and placement, kernel specs."""
