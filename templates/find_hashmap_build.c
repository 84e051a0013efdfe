/* ${comment} */
if (spf_hash_reset(&${table}, ${lo}, ${end}) != 0)
    goto spf_out_of_memory;
for (spf_index_t ${q} = ${end} - 1; ${q} >= ${lo}; --${q})
    spf_hash_insert(&${table}, ${key_q}, ${q});
