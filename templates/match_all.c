for (int ${var} = ${pos}; ${in_range_var} && ${is_match_var}; ${step_var}) {
