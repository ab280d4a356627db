// The KV cache as a pool of fixed-size blocks (user/llm/kvcache.c, whose
// top comment is the design; docs/KVCACHE.md for the course): every
// sequence reads and writes its full-attention keys and values through a
// block table, and full blocks are shared between sequences by prefix.
#ifndef AISVC_LLM_KVCACHE_H
#define AISVC_LLM_KVCACHE_H

#include "kernel/include/types.h"
#include "user/llm/loader.h"

#define LLM_KV_BLOCK  16   // B: positions per block
#define LLM_KV_SHARE  8    // default pool: 1/LLM_KV_SHARE of the free memory at start
#define LLM_KV_DEFMAX 2048 // default pool: at most this many blocks

// What the pool did and holds; every block is exactly one of used,
// cached or free (used + cached + free == nblocks).
struct llm_kvstats {
  uint64 requests;  // prompts looked up
  uint64 prompt;    // their positions
  uint64 hits;      // of those, positions taken from the cache
  uint64 evictions; // cached blocks taken back for other contents
  int used;         // blocks some sequence's table holds
  int cached;       // published blocks no table holds (the LRU list)
  int free;         // blocks with no contents
};

// One block's bookkeeping (its positions live in the pool's arrays).
struct llm_kvblock {
  uint64 hash;    // published: the hash of its chain (parent's hash, its ids)
  int parent;     // published: the block before it in its chain; -1 first
  int ref;        // sequence tables that hold it
  int kids;       // published blocks whose parent it is
  int published;  // in the hash table: its positions complete and final
  int hnext;      // next block of its hash bucket
  int prev, next; // the LRU list (published, ref 0) or the free list (next)
};

struct llm_kvpool {
  int nblocks, n_full, kvd, nkvh; // blocks; full-attention layers; kv dims and heads
  int reuse;                      // publish full blocks and look prompts up
  int hash_bits;                  // bits of the hash kept (64; fewer to force collisions)
  // the positions, block after block, each block n_full layers of B rows:
  // row ((b * n_full + layer) * B + t % B)
  int8 *kq, *vq;     // (rows, kvd)
  int32 *km, *vm;    // (rows, kvd / 32)
  double *kxs, *vxs; // (rows, n_kv_heads)
  int *ids;          // (nblocks, B) the ids each block's positions hold
  struct llm_kvblock *blk;
  int *bucket; // nbucket heads of the hash chains, -1 for none
  int nbucket;
  int lru_old, lru_new; // ends of the LRU list, -1 when empty
  int free_head;        // the free list, -1 when empty
  struct llm_kvstats st;
};

// One sequence's block table: entry i holds its positions [i*B, (i+1)*B).
struct llm_kvtable {
  struct llm_kvpool *pool;
  int *blk; // (runtime_seq_len / B rounded up) block ids
  int n;    // entries held
  int pub;  // entries published or found in the cache (a prefix of blk)
};

// Bytes of one position of every full-attention layer.
uint64 llm_kv_pos_bytes(const struct llm_config *g, int n_full);
// The default pool for a process serving `places` sequences at once:
// 1/LLM_KV_SHARE of the free memory, at least the places' full windows
// (so a request never waits for blocks), at most LLM_KV_DEFMAX blocks.
int llm_kv_default_blocks(const struct llm_config *g, int n_full, int places);
// Allocate a pool of nblocks blocks (reuse: prefix reuse on). Returns 0,
// or -1 if out of memory (nothing kept).
int llm_kv_init(
    struct llm_kvpool *p, const struct llm_config *g, int n_full, int nblocks, int reuse);
void llm_kv_free(struct llm_kvpool *p);

// Give table t (released first) blocks for `total` positions of a
// sequence whose prompt is ids[0..n): the longest chain of cached blocks
// that matches the prompt, cut so that at least one prompt position is
// left to compute, then free or evicted blocks. Returns the positions
// taken from the cache (0 .. n-1), or -1 if the pool is short (t then
// holds nothing).
int llm_kv_open(struct llm_kvtable *t, const int *ids, int n, int total);
// Publish t's blocks that seq[0..fed) completes (prefix reuse on): one
// equal to a published block is swapped for it (the copy goes free).
void llm_kv_publish(struct llm_kvtable *t, const int *seq, int fed);
// Release every block t holds, last first (so a chain's end is evicted
// before its start).
void llm_kv_close(struct llm_kvtable *t);
// Print the pool's size and counters on one stderr line, after prog.
void llm_kv_print(const struct llm_kvpool *p, const char *what);

// The row of position pos of full-attention layer `layer` in t's blocks.
static inline uint64
llm_kv_row(const struct llm_kvtable *t, int layer, int pos)
{
  int b = t->blk[pos / LLM_KV_BLOCK];
  return ((uint64)b * t->pool->n_full + layer) * LLM_KV_BLOCK + pos % LLM_KV_BLOCK;
}

#endif
