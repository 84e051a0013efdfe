if (${in_range} && ${is_match}) {
    const spf_index_t ${var} = ${pos};
