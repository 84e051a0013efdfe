for (spf_index_t ${var} = ${pos}; ${in_range_var} && ${is_match_var}; ${step_var}) {
