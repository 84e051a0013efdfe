/* Union of the terms of a sum: merge sorted, duplicate-free runs into one, combining the
 * values of equal keys by spf_add (a K-way merge; K is the number of terms, so a linear
 * scan for the smallest head is enough). */
static int spf_stream_merge(spf_stream *restrict out, const spf_stream *runs, int count)
{
    int64_t head[count];
    for (int r = 0; r < count; ++r)
        head[r] = 0;
    out->n = 0;
    for (;;) {
        int best = -1;
        for (int r = 0; r < count; ++r)
            if (head[r] < runs[r].n && (best < 0 || runs[r].key[head[r]] < runs[best].key[head[best]]))
                best = r;
        if (best < 0)
            return 0;
        const int64_t key = runs[best].key[head[best]];
        spf_value_t val = runs[best].val[head[best]++];
        for (int r = best + 1; r < count; ++r)
            if (head[r] < runs[r].n && runs[r].key[head[r]] == key)
                val = spf_add(val, runs[r].val[head[r]++]);
        if (spf_stream_push(out, key, val))
            return 1;
    }
}
