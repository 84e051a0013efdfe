for (spf_index_t ${var} = spf_hash_find(&${table}, ${target}); ${var} >= 0; ${var} = spf_hash_next(&${table}, ${var})) {
