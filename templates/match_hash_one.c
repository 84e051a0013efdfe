const spf_index_t ${pos} = spf_hash_find(&${table}, ${target});
if (${pos} >= 0) {
    const spf_index_t ${var} = ${pos};
