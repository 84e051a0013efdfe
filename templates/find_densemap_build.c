/* ${comment} */
for (spf_index_t ${q} = ${old_lo}; ${q} < ${old_end}; ++${q})   /* clear the previous range */
    ${clear}
for (spf_index_t ${q} = ${lo}; ${q} < ${end}; ++${q})
    ${fill}
${old_lo} = ${lo};
${old_end} = ${end};
