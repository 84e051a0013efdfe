/* Keys ranked within groups (a placed destination whose ranked index runs between a pointer
 * array's bounds, e.g. BCSR's block columns per block row).  The analysis pass recorded one
 * key per entry, keys[e] = group * 2^shift + key (key < 2^shift).  This returns, for each group, where its
 * distinct keys start (ptr[0..groups]), those keys in order (values, as key offsets
 * 0..2^shift - 1, increasing or, with descending, decreasing within each group) and each entry's
 * position among all of them (pos[e], what the fill pass reads).  Entries whose groups
 * arrive in non-decreasing order (a CSR source's rows, say) are ranked where they are;
 * others are first bucketed by group (a counting sort).  Work O(n + sum of d log d) for d
 * distinct keys per group, memory one marker per key value.  Returns 1 when out of memory. */
static int spf_key_cmp_up(const void *a, const void *b)
{
    const spf_index_t x = *(const spf_index_t *)a, y = *(const spf_index_t *)b;
    return (x > y) - (x < y);
}

static int spf_key_cmp_down(const void *a, const void *b)
{
    return spf_key_cmp_up(b, a);
}

static void spf_sort_keys(spf_index_t *restrict k, int64_t n, int descending)
{
    if (n > 16) {
        qsort(k, (size_t)n, sizeof *k, descending ? spf_key_cmp_down : spf_key_cmp_up);
        return;
    }
    for (int64_t a = 1; a < n; ++a) {      /* insertion sort: groups hold few keys */
        const spf_index_t v = k[a];
        int64_t b = a;
        while (b > 0 && (descending ? k[b - 1] < v : k[b - 1] > v)) {
            k[b] = k[b - 1];
            --b;
        }
        k[b] = v;
    }
}

/* Rank the m keys of one group, k64[c] & low or k32[c] (exactly one is given), entries
 * base + c or order[c]: its distinct keys go to values[count..], sorted; returns the new count. */
static inline int64_t spf_rank_group(int64_t m, const int64_t *restrict k64,
                                     const spf_index_t *restrict k32, int64_t low,
                                     const int64_t *restrict order, int64_t base,
                                     spf_index_t *restrict mark, spf_index_t *restrict values,
                                     int64_t count, int descending, int64_t *restrict pos)
{
    const int64_t first = count;
    for (int64_t c = 0; c < m; ++c) {
        const int64_t k = k32 ? k32[c] : (k64[c] & low);
        if (mark[k] < 0) {
            mark[k] = 0;
            values[count++] = (spf_index_t)k;
        }
    }
    spf_sort_keys(values + first, count - first, descending);
    for (int64_t r = first; r < count; ++r)
        mark[values[r]] = (spf_index_t)r;
    for (int64_t c = 0; c < m; ++c)
        pos[order ? order[c] : base + c] = mark[k32 ? k32[c] : (k64[c] & low)];
    for (int64_t r = first; r < count; ++r)
        mark[values[r]] = -1;
    return count;
}

int spf_rank_in_groups(int64_t n, const int64_t *restrict keys, int64_t groups, int shift,
                       int descending, spf_index_t *restrict ptr, spf_index_t *restrict values,
                       int64_t *restrict pos)
{
    const int64_t span = (int64_t)1 << shift, low = span - 1;
    spf_index_t *mark = malloc(sizeof *mark * (size_t)span);
    int64_t *start = NULL, *order = NULL;
    spf_index_t *key = NULL;
    if (!mark)
        return 1;
    memset(mark, 0xff, sizeof *mark * (size_t)span);    /* -1: not seen */
    memset(ptr, 0, sizeof *ptr * (size_t)(groups + 1));
    int in_order = 1;
    for (int64_t e = 1; e < n && in_order; ++e)
        in_order = (keys[e] >> shift) >= (keys[e - 1] >> shift);
    int64_t count = 0;
    if (in_order) {               /* each group's entries are one run */
        for (int64_t a = 0, b; a < n; a = b) {
            const int64_t g = keys[a] >> shift;
            for (b = a + 1; b < n && (keys[b] >> shift) == g; ++b)
                ;
            const int64_t before = count;
            count = spf_rank_group(b - a, keys + a, NULL, low, NULL, a, mark, values, count,
                                   descending, pos);
            ptr[g + 1] = (spf_index_t)(count - before);
        }
    } else {                      /* bucket the entries by group first (a counting sort) */
        start = calloc((size_t)groups + 2, sizeof *start);
        order = malloc(sizeof *order * (size_t)n);
        key = malloc(sizeof *key * (size_t)n);
        if (!start || !order || !key) {
            free(mark);
            free(start);
            free(order);
            free(key);
            return 1;
        }
        for (int64_t e = 0; e < n; ++e)
            ++start[(keys[e] >> shift) + 2];
        for (int64_t g = 0; g < groups; ++g)
            start[g + 2] += start[g + 1];
        for (int64_t e = 0; e < n; ++e) {     /* start[g + 1]: group g's cursor */
            const int64_t at = start[(keys[e] >> shift) + 1]++;
            order[at] = e;
            key[at] = (spf_index_t)(keys[e] & low);
        }
        for (int64_t g = 0; g < groups; ++g) {   /* group g: start[g] .. start[g + 1] */
            const int64_t before = count;
            count = spf_rank_group(start[g + 1] - start[g], NULL, key + start[g], low,
                                   order + start[g], 0, mark, values, count, descending, pos);
            ptr[g + 1] = (spf_index_t)(count - before);
        }
    }
    for (int64_t g = 0; g < groups; ++g)
        ptr[g + 1] += ptr[g];
    free(mark);
    free(start);
    free(order);
    free(key);
    return 0;
}
