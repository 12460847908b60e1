/* Fast sequential access to a trace's samples for consumers that need only
 * their time, address, weight, data source and access kind (the
 * estimator's summary building): a block's samples are decoded a chunk at a
 * time into a buffer that stays in cache, and the columns not asked for
 * (instruction pointers, thread ids) are never decoded. Blocks are still
 * checked against the index and their checksums, and every column header is
 * checked. */
#ifndef HETMEM_TRACE_SCAN_H
#define HETMEM_TRACE_SCAN_H

#include "trace/trace_internal.h"

/* Starts scanning block i of t: reads, checks and decompresses it, and
 * returns its events (the block's non-sample records in time order, with
 * their times), valid until the next call on t. A block decoded by
 * hm_trace_read_block() or hm_trace_next() is dropped (they decode again
 * when called). 0 or a negative HM_E* code with a detail naming the block. */
int hm__trace_scan_block(hm_trace_t *t, uint32_t i, const hm_record_t **events, const uint64_t **evtime,
                         uint32_t *nev);
/* Decodes the next samples of the block being scanned into out (the
 * caller's): their count, 0 once the block is done, or a negative HM_E*
 * code. Only after hm__trace_scan_block() succeeded. */
int hm__trace_scan_next(hm_trace_t *t, hm__scan_chunk_t *out);

#endif
