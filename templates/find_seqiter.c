/* ${comment} */
while (${in_range} && ${advance})
    ${step};
