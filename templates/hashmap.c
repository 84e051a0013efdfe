/* Open-addressing hash map from a coordinate to the positions holding it (HashMap find).
 * Positions with equal keys are chained through next[] in increasing order. */
typedef struct spf_hash {
    int64_t *keys;      /* slot -> key */
    spf_index_t *heads;     /* slot -> first position with that key, -1 when the slot is empty */
    spf_index_t *next;      /* position - base -> next position with the same key, or -1 */
    int64_t capacity;   /* number of slots, a power of two */
    int64_t room;       /* length of next[] */
    spf_index_t base;       /* first position of the range */
} spf_hash;

static inline uint64_t spf_hash_slot(int64_t key, int64_t capacity)
{
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ULL;
    return (h ^ (h >> 29)) & (uint64_t)(capacity - 1);
}

/* Empty the map for positions [base, end); returns non-zero when out of memory. */
static int spf_hash_reset(spf_hash *h, spf_index_t base, spf_index_t end)
{
    int64_t len = end > base ? (int64_t)end - base : 0;
    int64_t want = 16;
    while (want < 2 * len)
        want *= 2;
    if (want > h->capacity) {
        free(h->keys);
        free(h->heads);
        h->keys = malloc(sizeof(int64_t) * (size_t)want);
        h->heads = malloc(sizeof(spf_index_t) * (size_t)want);
        h->capacity = want;
        if (!h->keys || !h->heads)
            return 1;
    }
    if (len > h->room) {
        free(h->next);
        h->next = malloc(sizeof(spf_index_t) * (size_t)len);
        h->room = len;
        if (!h->next)
            return 1;
    }
    memset(h->heads, 0xff, sizeof(spf_index_t) * (size_t)h->capacity);
    h->base = base;
    return 0;
}

/* Insert positions in decreasing order so that chains come out increasing. */
static inline void spf_hash_insert(spf_hash *h, int64_t key, spf_index_t pos)
{
    uint64_t s = spf_hash_slot(key, h->capacity);
    while (h->heads[s] >= 0 && h->keys[s] != key)
        s = (s + 1) & (uint64_t)(h->capacity - 1);
    h->next[pos - h->base] = h->heads[s];
    h->keys[s] = key;
    h->heads[s] = pos;
}

static inline spf_index_t spf_hash_find(const spf_hash *h, int64_t key)
{
    uint64_t s = spf_hash_slot(key, h->capacity);
    while (h->heads[s] >= 0) {
        if (h->keys[s] == key)
            return h->heads[s];
        s = (s + 1) & (uint64_t)(h->capacity - 1);
    }
    return -1;
}

static inline spf_index_t spf_hash_next(const spf_hash *h, spf_index_t pos)
{
    return h->next[pos - h->base];
}

static void spf_hash_free(spf_hash *h)
{
    free(h->keys);
    free(h->heads);
    free(h->next);
}
