const int ${pos} = spf_hash_find(&${table}, ${target});
if (${pos} >= 0) {
    const int ${var} = ${pos};
