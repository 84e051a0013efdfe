/* ${comment} */
spf_index_t ${low} = ${lo}, ${high} = ${end};
while (${low} < ${high}) {
    const spf_index_t ${mid} = ${low} + (${high} - ${low}) / 2;
    if (${advance_mid})
        ${low} = ${mid} + 1;
    else
        ${high} = ${mid};
}
