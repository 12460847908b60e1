/*
 * sort: integer bucket sort / ranking (NPB IS-like). Random scatter writes
 * and histogramming, the memory pattern of particle binning and of the
 * shuffle step of distributed sorts.
 *
 * Keys follow IS's bell-shaped distribution (mean of four uniforms) over
 * [0, max_key). Every iteration first changes two keys (as IS does, so each
 * iteration ranks a new array), then ranks all keys: count keys per bucket
 * (high bits), scatter them into key_buff2 by bucket, histogram the bucket-
 * ordered keys into key_buff1 (cache-friendly because buckets are
 * contiguous), and prefix-sum the histogram into ranks.
 *
 * Verification:
 *  1. every iteration, the ranks of five test keys (keys smaller than the
 *     test value) equal a naive count over the whole key array;
 *  2. after the last iteration, the keys placed by rank form a
 *     non-decreasing sequence with the same multiset (two order-independent
 *     checksums) as the key array.
 *
 * Objects: key_buff1 (histogram: N random increments per iteration on a
 * small array, hottest per byte), key_array (read ~2 times per iteration),
 * key_buff2 (scatter-written and read once per iteration), bucket_size /
 * bucket_ptrs (tiny), sorted (cold: written and read once at the end).
 */
#include "../common/miniapp.h"

#include <string.h>

enum { NTEST = 5 };

static uint64_t log2_keys, log2_maxkey, log2_buckets, iters;
static int inject;

static void preset_tiny(void)   { log2_keys = 20; log2_maxkey = 16; log2_buckets = 10; iters = 30; }
static void preset_small(void)  { log2_keys = 23; log2_maxkey = 19; log2_buckets = 10; iters = 30; }
static void preset_medium(void) { log2_keys = 25; log2_maxkey = 21; log2_buckets = 10; iters = 30; }

static const ma_preset_t presets[] = {
    {"tiny", preset_tiny, "2^20 keys < 2^16 (IS class W, 3 x 4 MiB), 30 iterations"},
    {"small", preset_small, "2^23 keys < 2^19 (class A, 3 x 32 MiB), 30 iterations"},
    {"medium", preset_medium, "2^25 keys < 2^21 (class B, 3 x 128 MiB), 30 iterations"},
};

static const ma_opt_t opts[] = {
    {"--log2-keys", "L", MA_OPT_U64, &log2_keys, 4, 30, "2^L keys (ranks are 32-bit)"},
    {"--log2-maxkey", "L", MA_OPT_U64, &log2_maxkey, 2, 30, "keys lie in [0, 2^L)"},
    {"--log2-buckets", "L", MA_OPT_U64, &log2_buckets, 0, 20, "2^L buckets (<= 2^log2-maxkey)"},
    {"--iters", "N", MA_OPT_U64, &iters, 1, 1e5, "ranking iterations"},
    {"--inject-error", NULL, MA_OPT_FLAG, &inject, 0, 0, NULL},
};

static const ma_app_t app = {"sort", "NPB IS-like integer bucket sort and ranking",
                             presets, MA_COUNT(presets), opts, MA_COUNT(opts)};

enum { PH_GENERATE, PH_BUCKET, PH_RANK, PH_PARTIAL, PH_FULL, PH_N };

/* Order-independent fingerprints of a multiset of keys. */
static void fingerprint(const int32_t *k, size_t n, uint64_t out[2])
{
    uint64_t s = 0, h = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (uint64_t)k[i] * 0x9e3779b97f4a7c15ull;
        z ^= z >> 29;
        s += (uint64_t)k[i];
        h += z * 0xbf58476d1ce4e5b9ull;
    }
    out[0] = s;
    out[1] = h;
}

int main(int argc, char **argv)
{
    ma_phase_t ph[PH_N] = {MA_PHASE("generate"), MA_PHASE("bucket"), MA_PHASE("rank"),
                           MA_PHASE("partial_verify"), MA_PHASE("full_verify")};
    int32_t *key_array, *key_buff1, *key_buff2, *sorted, *bucket_size, *bucket_ptrs;
    int32_t test_value[NTEST];
    ma_rng_t rng;
    size_t partial_bad = 0, order_bad = 0, rank_bad = 0;

    ma_parse(&app, argc, argv);
    if (log2_buckets > log2_maxkey) ma_fail(2, "--log2-buckets", "more buckets than key values");
    if (log2_maxkey > log2_keys + 8)
        ma_fail(2, "--log2-maxkey", "key range more than 256x the key count (the histogram would dominate)");
    const size_t n = (size_t)1 << log2_keys, max_key = (size_t)1 << log2_maxkey;
    const size_t nb = (size_t)1 << log2_buckets;
    const unsigned shift = (unsigned)(log2_maxkey - log2_buckets);
    ma_check_footprint("--log2-keys", 12.0 * (double)n + 4.0 * (double)max_key);
    printf("sort: keys=%zu max_key=%zu buckets=%zu iters=%llu\n", n, max_key, nb,
           (unsigned long long)iters);

    MA_ALLOC(key_array, n, "key_array");
    MA_ALLOC(key_buff2, n, "key_buff2");
    MA_ALLOC(key_buff1, max_key, "key_buff1");
    MA_ALLOC(bucket_size, nb, "bucket_size");
    MA_ALLOC(bucket_ptrs, nb, "bucket_ptrs");
    MA_ALLOC(sorted, n, "sorted");
    memset(sorted, 0, n * sizeof *sorted); /* defined even where bad ranks leave holes */

    ma_phase_begin(&ph[PH_GENERATE]);
    ma_rng_seed(&rng, 0x15);
    for (size_t i = 0; i < n; i++) {
        const double x = ma_rng_uniform(&rng) + ma_rng_uniform(&rng) + ma_rng_uniform(&rng) +
                         ma_rng_uniform(&rng);
        key_array[i] = (int32_t)((double)max_key / 4.0 * x); /* x < 4, so < max_key */
    }
    for (int t = 0; t < NTEST; t++) test_value[t] = (int32_t)ma_rng_below(&rng, max_key);
    ma_phase_end(&ph[PH_GENERATE]);

    for (uint64_t it = 1; it <= iters; it++) {
        /* IS's per-iteration modification, so no two iterations rank the
         * same array (indices kept in range for any size). */
        key_array[it % n] = (int32_t)(it % max_key);
        key_array[(it + iters) % n] = (int32_t)((max_key - it % max_key) % max_key);

        ma_phase_begin(&ph[PH_BUCKET]);
        memset(bucket_size, 0, nb * sizeof *bucket_size);
        for (size_t i = 0; i < n; i++) bucket_size[key_array[i] >> shift]++;
        bucket_ptrs[0] = 0;
        for (size_t b = 1; b < nb; b++) bucket_ptrs[b] = bucket_ptrs[b - 1] + bucket_size[b - 1];
        for (size_t i = 0; i < n; i++) {
            const int32_t k = key_array[i];
            key_buff2[bucket_ptrs[k >> shift]++] = k;
        }
        ma_phase_end(&ph[PH_BUCKET]);

        /* key_buff1[k] = number of keys <= k */
        ma_phase_begin(&ph[PH_RANK]);
        memset(key_buff1, 0, max_key * sizeof *key_buff1);
        for (size_t i = 0; i < n; i++) key_buff1[key_buff2[i]]++;
        if (inject && it == iters) key_buff1[test_value[0] > 0 ? test_value[0] - 1 : 0]++; /* test hook */
        for (size_t k = 1; k < max_key; k++) key_buff1[k] += key_buff1[k - 1];
        ma_phase_end(&ph[PH_RANK]);

        /* rank(v) = keys < v = key_buff1[v - 1], against a naive count. */
        ma_phase_begin(&ph[PH_PARTIAL]);
        size_t naive[NTEST] = {0};
        for (size_t i = 0; i < n; i++)
            for (int t = 0; t < NTEST; t++) naive[t] += key_array[i] < test_value[t];
        for (int t = 0; t < NTEST; t++) {
            const size_t rank = test_value[t] > 0 ? (size_t)key_buff1[test_value[t] - 1] : 0;
            if (rank != naive[t]) partial_bad++;
        }
        ma_phase_end(&ph[PH_PARTIAL]);
    }

    /* Place every key at its rank (as IS's full_verify), then check order
     * and that the multiset is unchanged. */
    ma_phase_begin(&ph[PH_FULL]);
    uint64_t fp_in[2], fp_out[2];
    for (size_t i = 0; i < n; i++) {
        const int32_t k = key_buff2[i];
        const int32_t pos = --key_buff1[k];
        if (pos < 0 || (size_t)pos >= n) { /* wrong ranks: count, don't write */
            rank_bad++;
            continue;
        }
        sorted[pos] = k;
    }
    for (size_t i = 1; i < n; i++) order_bad += sorted[i - 1] > sorted[i];
    fingerprint(key_array, n, fp_in);
    fingerprint(sorted, n, fp_out);
    const int same = fp_in[0] == fp_out[0] && fp_in[1] == fp_out[1];
    ma_phase_end(&ph[PH_FULL]);

    ma_report_phases(ph, PH_N);
    printf("rate: %.1f Mkeys/s\n", (double)n * (double)iters /
                                      (ph[PH_BUCKET].total + ph[PH_RANK].total) / 1e6);
    printf("partial verification failures: %zu of %llu, ranks out of range: %zu, out-of-order pairs: %zu, "
           "multiset %s\n", partial_bad, (unsigned long long)(NTEST * iters), rank_bad, order_bad,
           same ? "unchanged" : "CHANGED");

    free(key_array);
    free(key_buff1);
    free(key_buff2);
    free(sorted);
    free(bucket_size);
    free(bucket_ptrs);
    return ma_finish(partial_bad == 0 && rank_bad == 0 && order_bad == 0 && same);
}
