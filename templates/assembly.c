/* Output assembly: entries (key, value) are appended to a stream in storage order (key =
 * the output coordinates linearized in the output layout's level order).  Coordinates
 * that the loops do not produce in order are gathered per group in a dense workspace. */
typedef struct spf_stream {
    int64_t n, cap;
    int64_t *key;
    spf_value_t *val;
} spf_stream;

/* Make room for ``extra`` more entries (capacity at least doubles); 1 when out of memory. */
static inline int spf_stream_reserve(spf_stream *s, int64_t extra)
{
    if (s->n + extra <= s->cap)
        return 0;
    int64_t cap = s->cap ? 2 * s->cap : 4096;
    if (cap < s->n + extra)
        cap = s->n + extra;
    int64_t *k = spf_realloc(s->key, sizeof(int64_t) * (size_t)cap);
    if (!k)
        return 1;
    s->key = k;
    spf_value_t *v = spf_realloc(s->val, sizeof(spf_value_t) * (size_t)cap);
    if (!v)
        return 1;
    s->val = v;
    s->cap = cap;
    return 0;
}

static inline int spf_stream_push(spf_stream *s, int64_t key, spf_value_t val)
{
    if (s->n == s->cap && spf_stream_reserve(s, 1))
        return 1;
    s->key[s->n] = key;
    s->val[s->n] = val;
    s->n++;
    return 0;
}

static inline void spf_stream_free(spf_stream *s)
{
    free(s->key);
    free(s->val);
    s->key = NULL;
    s->val = NULL;
    s->n = s->cap = 0;
}

/* Sort keys (and their values when vals != NULL) increasingly: quicksort, insertion sort
 * below 24 elements. */
static inline void spf_sort(int64_t *keys, spf_value_t *vals, int64_t n)
{
    while (n > 24) {
        int64_t a = keys[0], b = keys[n / 2], c = keys[n - 1];
        int64_t pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t i = 0, j = n - 1;
        while (i <= j) {
            while (keys[i] < pivot)
                ++i;
            while (keys[j] > pivot)
                --j;
            if (i <= j) {
                int64_t t = keys[i];
                keys[i] = keys[j];
                keys[j] = t;
                if (vals) {
                    spf_value_t u = vals[i];
                    vals[i] = vals[j];
                    vals[j] = u;
                }
                ++i;
                --j;
            }
        }
        if (j + 1 < n - i) {            /* recurse on the smaller side */
            spf_sort(keys, vals, j + 1);
            keys += i;
            if (vals)
                vals += i;
            n -= i;
        } else {
            spf_sort(keys + i, vals ? vals + i : NULL, n - i);
            n = j + 1;
        }
    }
    for (int64_t i = 1; i < n; ++i) {
        int64_t k = keys[i];
        spf_value_t v = vals ? vals[i] : 0;
        int64_t j = i - 1;
        while (j >= 0 && keys[j] > k) {
            keys[j + 1] = keys[j];
            if (vals)
                vals[j + 1] = vals[j];
            --j;
        }
        keys[j + 1] = k;
        if (vals)
            vals[j + 1] = v;
    }
}

/* Sort the whole stream and combine entries with equal keys (spf_add). */
static inline void spf_stream_sort_combine(spf_stream *s)
{
    spf_sort(s->key, s->val, s->n);
    int64_t m = 0;
    for (int64_t e = 0; e < s->n; ++e) {
        if (m > 0 && s->key[m - 1] == s->key[e]) {
            s->val[m - 1] = spf_add(s->val[m - 1], s->val[e]);
        } else {
            s->key[m] = s->key[e];
            s->val[m] = s->val[e];
            ++m;
        }
    }
    s->n = m;
}

/* Dense workspace over the unordered part of the key (size slots): the entries of one group
 * (one value of the ordered part, "prefix") accumulate here until the prefix changes.  A
 * bit per slot marks the slots the group touched, a summary bit per 64-slot word marks the
 * words with a touched slot, and the group also lists its slots in the order touched. */
typedef struct spf_workspace {
    int64_t size, n, prefix, words;     /* words: length of summary */
    uint64_t *bits, *summary;
    int64_t *list;
    spf_value_t *val;
} spf_workspace;

static inline int spf_ws_init(spf_workspace *ws, int64_t size, int64_t prefix)
{
    size = size > 0 ? size : 1;
    ws->size = size;
    ws->n = 0;
    ws->prefix = prefix;
    ws->words = size / 4096 + 1;
    ws->bits = calloc((size_t)(size / 64 + 1), sizeof(uint64_t));
    ws->summary = calloc((size_t)ws->words, sizeof(uint64_t));
    ws->list = malloc(sizeof(int64_t) * (size_t)(size + 4));   /* + 4: spf_ws_order writes ahead */
    ws->val = malloc(sizeof(spf_value_t) * (size_t)size);
    return !ws->bits || !ws->summary || !ws->list || !ws->val;
}

static inline void spf_ws_free(spf_workspace *ws)
{
    free(ws->bits);
    free(ws->summary);
    free(ws->list);
    free(ws->val);
    ws->bits = ws->summary = NULL;
    ws->list = NULL;
    ws->val = NULL;
}

static inline void spf_ws_add(spf_workspace *restrict ws, int64_t slot, spf_value_t v)
{
    const int64_t word = slot >> 6;
    const uint64_t bit = (uint64_t)1 << (slot & 63);
    if (!(ws->bits[word] & bit)) {
        ws->bits[word] |= bit;
        ws->summary[word >> 6] |= (uint64_t)1 << (word & 63);
        ws->val[slot] = v;
        ws->list[ws->n++] = slot;
    } else {
        ws->val[slot] = spf_add(ws->val[slot], v);
    }
}

/* Leave the current group's slots in list[0..n) in the order first touched and clear their
 * bits (for coordinates the output keeps in no particular order). */
static inline int64_t spf_ws_release(spf_workspace *restrict ws)
{
    for (int64_t t = 0; t < ws->n; ++t) {
        ws->bits[ws->list[t] >> 6] = 0;
        ws->summary[ws->list[t] >> 12] = 0;
    }
    return ws->n;
}

/* Put the current group's slots in increasing order into list[0..n) and clear their bits.
 * The slots come from the bits, through the summary words between the group's smallest and
 * largest slot (cost ~ those words + touched words;
 * each touched word is flattened without a branch per bit), or, for a group of at most 16
 * slots or one small against the workspace, from sorting the list (insertion sort below 24;
 * measured faster than the walk for short rows). */
static inline int64_t spf_ws_order(spf_workspace *restrict ws)
{
    const int64_t n = ws->n;
    if (n == 0)
        return 0;
    int64_t lo = ws->list[0], hi = ws->list[0];   /* the summary words the group touched */
    for (int64_t t = 1; t < n; ++t) {
        lo = ws->list[t] < lo ? ws->list[t] : lo;
        hi = ws->list[t] > hi ? ws->list[t] : hi;
    }
    int64_t log2n = 0;
    while (((int64_t)1 << log2n) < n)
        ++log2n;
    if (n <= 16 || (hi >> 12) - (lo >> 12) + 1 > 2 * n * log2n) {
        spf_sort(ws->list, NULL, n);
        for (int64_t t = 0; t < n; ++t) {
            const int64_t w = ws->list[t];
            ws->bits[w >> 6] = 0;
            ws->summary[w >> 12] = 0;
        }
        return n;
    }
    int64_t *restrict list = ws->list;
    int64_t t = 0;
    for (int64_t s = lo >> 12; s <= hi >> 12; ++s) {
        uint64_t used = ws->summary[s];
        ws->summary[s] = 0;
        while (used) {
            const int64_t word = 64 * s + __builtin_ctzll(used);
            used &= used - 1;
            uint64_t b = ws->bits[word];
            ws->bits[word] = 0;
            const int64_t at = 64 * word;
            const int cnt = __builtin_popcountll(b);
            /* write four slots unconditionally (the list has room: a word's slots are
             * already listed), keep cnt of them; loop only for denser words */
            int64_t *restrict out = list + t;
            out[0] = at + __builtin_ctzll(b | ((uint64_t)1 << 63));
            b &= b - 1;
            out[1] = at + __builtin_ctzll(b | ((uint64_t)1 << 63));
            b &= b - 1;
            out[2] = at + __builtin_ctzll(b | ((uint64_t)1 << 63));
            b &= b - 1;
            out[3] = at + __builtin_ctzll(b | ((uint64_t)1 << 63));
            b &= b - 1;
            for (int q = 4; q < cnt; ++q) {
                out[q] = at + __builtin_ctzll(b);
                b &= b - 1;
            }
            t += cnt;
        }
    }
    return n;
}

/* Append the current group in key order to a stream and start group ``next``. */
static inline int spf_ws_flush(spf_workspace *restrict ws, spf_stream *restrict out, int64_t next)
{
    const int64_t base = ws->prefix * ws->size;
    const int64_t n = spf_ws_order(ws);
    if (n > 0 && spf_stream_reserve(out, n))
        return 1;
    int64_t *restrict key = out->key + out->n;
    spf_value_t *restrict val = out->val + out->n;
    for (int64_t t = 0; t < n; ++t) {
        key[t] = base + ws->list[t];
        val[t] = ws->val[ws->list[t]];
    }
    out->n += n;
    ws->n = 0;
    ws->prefix = next;
    return 0;
}

/* Parallel assembly: one workspace per thread, all allocated before the threads start (a
 * failed allocation is reported before any entry is written); NULL when out of memory. */
static inline void spf_wss_free(spf_workspace *w, int threads)
{
    if (!w)
        return;
    for (int t = 0; t < threads; ++t)
        spf_ws_free(&w[t]);
    free(w);
}

static inline spf_workspace *spf_wss_init(int threads, int64_t size)
{
    spf_workspace *w = calloc((size_t)threads, sizeof(spf_workspace));
    if (!w)
        return NULL;
    for (int t = 0; t < threads; ++t)
        if (spf_ws_init(&w[t], size, -1)) {
            spf_wss_free(w, threads);
            return NULL;
        }
    return w;
}

/* Mark a slot of the current group (the counting pass: no value). */
static inline void spf_ws_mark(spf_workspace *restrict ws, int64_t slot)
{
    const int64_t word = slot >> 6;
    const uint64_t bit = (uint64_t)1 << (slot & 63);
    if (!(ws->bits[word] & bit)) {
        ws->bits[word] |= bit;
        ws->summary[word >> 6] |= (uint64_t)1 << (word & 63);
        ws->list[ws->n++] = slot;
    }
}

/* The number of distinct slots of the current group; the workspace is cleared for the next. */
static inline int64_t spf_ws_count(spf_workspace *restrict ws)
{
    const int64_t n = spf_ws_release(ws);
    ws->n = 0;
    return n;
}

/* Sort a segment's (coordinate, value) pairs by coordinate (decreasing when descending):
 * insertion sort below 24 pairs, quicksort above. */
static inline void spf_sort_pairs(spf_index_t *restrict crd, spf_value_t *restrict val, int64_t n, int descending)
{
    while (n > 24) {
        const spf_index_t a = crd[0], b = crd[n / 2], c = crd[n - 1];
        spf_index_t pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t i = 0, j = n - 1;
        while (i <= j) {
            while (descending ? crd[i] > pivot : crd[i] < pivot)
                ++i;
            while (descending ? crd[j] < pivot : crd[j] > pivot)
                --j;
            if (i <= j) {
                const spf_index_t t = crd[i];
                crd[i] = crd[j];
                crd[j] = t;
                const spf_value_t u = val[i];
                val[i] = val[j];
                val[j] = u;
                ++i;
                --j;
            }
        }
        if (j + 1 < n - i) {            /* recurse on the smaller side */
            spf_sort_pairs(crd, val, j + 1, descending);
            crd += i;
            val += i;
            n -= i;
        } else {
            spf_sort_pairs(crd + i, val + i, n - i, descending);
            n = j + 1;
        }
    }
    for (int64_t i = 1; i < n; ++i) {
        const spf_index_t k = crd[i];
        const spf_value_t v = val[i];
        int64_t j = i - 1;
        while (j >= 0 && (descending ? crd[j] < k : crd[j] > k)) {
            crd[j + 1] = crd[j];
            val[j + 1] = val[j];
            --j;
        }
        crd[j + 1] = k;
        val[j + 1] = v;
    }
}

/* Bucket assembly, after the scatter: ptr[b] is one past bucket b's last entry (bucket b
 * starts where b - 1 ends).  Each bucket is sorted by coordinate (when sort) and, when
 * combine, entries with equal coordinates are combined (spf_add) and the buckets compacted to the front;
 * ptr becomes the pointer array (ptr[b + 1]: end of bucket b).  Returns the entries kept. */
static inline int64_t spf_bucket_finish(int64_t buckets, spf_index_t *restrict ptr,
                                        spf_index_t *restrict crd, spf_value_t *restrict val, int sort,
                                        int combine, int descending)
{
    int64_t start = 0, kept = 0, stop = buckets > 0 ? ptr[0] : 0;
    for (int64_t b = 0; b < buckets; ++b) {
        const int64_t next = b + 1 < buckets ? ptr[b + 1] : 0;   /* read before it is set */
        if (sort && stop - start > 1)
            spf_sort_pairs(crd + start, val + start, stop - start, descending);
        if (!combine) {
            kept = stop;
        } else {
            const int64_t first = kept;
            for (int64_t e = start; e < stop; ++e) {
                if (kept > first && crd[kept - 1] == crd[e]) {
                    val[kept - 1] = spf_add(val[kept - 1], val[e]);
                } else {
                    crd[kept] = crd[e];
                    val[kept] = val[e];
                    ++kept;
                }
            }
        }
        ptr[b + 1] = (spf_index_t)kept;
        start = stop;
        stop = next;
    }
    ptr[0] = 0;
    return kept;
}
