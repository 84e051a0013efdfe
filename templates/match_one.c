if (${in_range} && ${is_match}) {
    const int ${var} = ${pos};
