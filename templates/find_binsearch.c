/* ${comment} */
int ${low} = ${lo}, ${high} = ${end};
while (${low} < ${high}) {
    const int ${mid} = ${low} + (${high} - ${low}) / 2;
    if (${advance_mid})
        ${low} = ${mid} + 1;
    else
        ${high} = ${mid};
}
