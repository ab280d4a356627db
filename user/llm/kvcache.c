// The KV cache as memory the runtime manages (docs/KVCACHE.md): a pool of
// blocks of B = LLM_KV_BLOCK positions, each holding the int8 keys and
// values (with their group multipliers and scales) of every full-attention
// layer for B consecutive positions of one sequence, allocated once at
// start. A sequence reaches its positions through its block table
// (struct llm_kvtable): position t is row t % B of block blk[t / B], so
// its blocks need not be adjacent, and two sequences may hold the same
// block.
//
// Prefix reuse. A full block's contents depend on the ids of its own
// positions and of every position before it, and on nothing else (the
// arithmetic is exact, docs/ARITHMETIC.md). So a full block is named by
// its chain: (its parent block, its B ids), hashed as (the parent's
// hash, the ids). Once a sequence has run all B positions of a block, the
// block is published in a hash table. A new prompt walks its full blocks
// from the first, looking each one up; a hit is checked in full (same
// parent block, same ids: a hash collision can never match), so the chain
// it takes holds exactly the keys and values the prompt would compute.
// At least one prompt position is always computed (its logits give the
// first id): when the whole prompt is cached, the last block is copied
// but for its last position, which is computed again.
//
// Every block is in exactly one state:
//   used    ref > 0: some sequence's table holds it (shared when ref > 1);
//   cached  published, ref 0: on the LRU list, oldest first;
//   free    not published, ref 0: on the free list, no contents.
// A published block's parent is published, and counts it in `kids`; a
// block is evicted (unpublished, its contents given up) only when cached
// with no kids, so a chain's blocks go from its end, and the parent a
// published block names is always the block whose contents it followed.
// A table that holds a block holds its whole chain, so a cached block's
// descendants are cached too: any cached block can be freed, children
// first. New blocks come from the free list, else from the oldest
// evictable cached block. Only blocks whose every position has been run
// are published: a sequence that ends early (cancelled, killed) leaves
// nothing half-written behind; its unpublished blocks go free.

#include "user/lib/user.h"
#include "kernel/include/sysinfo.h"
#include "user/llm/kvcache.h"

#define B LLM_KV_BLOCK

// ---------------------------------------------------------------- sizes

uint64
llm_kv_pos_bytes(const struct llm_config *g, int n_full)
{
  uint64 kvd = (uint64)g->n_kv_heads * g->head_dim;
  uint64 one = 2 * (kvd + (kvd / LLM_GS) * sizeof(int32) + g->n_kv_heads * sizeof(double));
  return one * n_full;
}

int
llm_kv_default_blocks(const struct llm_config *g, int n_full, int places)
{
  struct sysinfo si = { 0 };
  uint64 per = llm_kv_pos_bytes(g, n_full) * B + B * sizeof(int);
  int least = places * ((g->runtime_seq_len + B - 1) / B);
  uint64 share = sysinfo(&si) == 0 ? si.freepages * 4096 / LLM_KV_SHARE : 0;
  uint64 n = per ? share / per : 0;
  if (n > LLM_KV_DEFMAX)
    n = LLM_KV_DEFMAX;
  return n < (uint64)least ? least : (int)n;
}

// ---------------------------------------------------------------- lists

// Unlink block b from the LRU list.
static void
lru_remove(struct llm_kvpool *p, int b)
{
  struct llm_kvblock *k = &p->blk[b];
  if (k->prev >= 0)
    p->blk[k->prev].next = k->next;
  else
    p->lru_old = k->next;
  if (k->next >= 0)
    p->blk[k->next].prev = k->prev;
  else
    p->lru_new = k->prev;
  k->prev = k->next = -1;
  p->st.cached--;
}

// Append block b to the LRU list as its newest.
static void
lru_append(struct llm_kvpool *p, int b)
{
  struct llm_kvblock *k = &p->blk[b];
  k->prev = p->lru_new;
  k->next = -1;
  if (p->lru_new >= 0)
    p->blk[p->lru_new].next = b;
  else
    p->lru_old = b;
  p->lru_new = b;
  p->st.cached++;
}

// Put block b (ref 0, not published) on the free list.
static void
free_push(struct llm_kvpool *p, int b)
{
  p->blk[b].next = p->free_head;
  p->blk[b].prev = -1;
  p->free_head = b;
  p->st.free++;
}

// ---------------------------------------------------------------- hashing

// The chain hash of a block with parent hash `parent` and ids[0..B),
// FNV-1a over the ids' bytes, then mixed so that every bit depends on
// every input; kept to the pool's hash_bits.
static uint64
chain_hash(const struct llm_kvpool *p, uint64 parent, const int *ids)
{
  uint64 h = parent ^ 0xcbf29ce484222325UL;
  for (int i = 0; i < B; i++)
    for (int k = 0; k < 4; k++) {
      h ^= ((uint32)ids[i] >> (8 * k)) & 0xff;
      h *= 0x100000001b3UL;
    }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdUL;
  h ^= h >> 33;
  return p->hash_bits >= 64 ? h : h & ((1UL << p->hash_bits) - 1);
}

// The published block with hash h, parent `parent` and ids[0..B), or -1:
// the hash only finds candidates, the parent and the ids decide.
static int
lookup(const struct llm_kvpool *p, uint64 h, int parent, const int *ids)
{
  for (int b = p->bucket[h % p->nbucket]; b >= 0; b = p->blk[b].hnext) {
    const struct llm_kvblock *k = &p->blk[b];
    if (k->hash == h && k->parent == parent &&
        memcmp(p->ids + (uint64)b * B, ids, B * sizeof(int)) == 0)
      return b;
  }
  return -1;
}

// Publish block b (held, all its positions run) with hash h after parent.
static void
publish(struct llm_kvpool *p, int b, uint64 h, int parent)
{
  struct llm_kvblock *k = &p->blk[b];
  k->hash = h;
  k->parent = parent;
  k->published = 1;
  k->hnext = p->bucket[h % p->nbucket];
  p->bucket[h % p->nbucket] = b;
  if (parent >= 0)
    p->blk[parent].kids++;
}

// Take block b (cached, no kids) out of the hash table and its parent's kids.
static void
unpublish(struct llm_kvpool *p, int b)
{
  struct llm_kvblock *k = &p->blk[b];
  int *at = &p->bucket[k->hash % p->nbucket];
  while (*at != b)
    at = &p->blk[*at].hnext;
  *at = k->hnext;
  if (k->parent >= 0)
    p->blk[k->parent].kids--;
  k->published = 0;
}

// ---------------------------------------------------------------- holding

// Hold block b once more (it leaves the LRU list at its first holder).
static void
hold(struct llm_kvpool *p, int b)
{
  if (p->blk[b].ref++ == 0) {
    if (p->blk[b].published)
      lru_remove(p, b);
    p->st.used++;
  }
}

// Hold block b once less: at 0 it is cached if published, else free.
static void
drop(struct llm_kvpool *p, int b)
{
  if (--p->blk[b].ref > 0)
    return;
  p->st.used--;
  if (p->blk[b].published)
    lru_append(p, b);
  else
    free_push(p, b);
}

// A block with no contents, held once: a free one, else the oldest cached
// block without kids, evicted. -1 if every block is used.
static int
take_block(struct llm_kvpool *p)
{
  int b = p->free_head;
  if (b >= 0) {
    p->free_head = p->blk[b].next;
    p->st.free--;
  } else {
    for (b = p->lru_old; b >= 0 && p->blk[b].kids > 0; b = p->blk[b].next)
      ;
    if (b < 0)
      return -1;
    lru_remove(p, b);
    unpublish(p, b);
    p->st.evictions++;
  }
  p->blk[b].ref = 1;
  p->blk[b].prev = p->blk[b].next = -1;
  p->st.used++;
  return b;
}

// Copy rows [0, rows) of every layer of block from into block to.
static void
copy_rows(struct llm_kvpool *p, int to, int from, int rows)
{
  int ng = p->kvd / LLM_GS;
  for (int l = 0; l < p->n_full; l++) {
    uint64 d = ((uint64)to * p->n_full + l) * B, s = ((uint64)from * p->n_full + l) * B;
    memmove(p->kq + d * p->kvd, p->kq + s * p->kvd, (uint64)rows * p->kvd);
    memmove(p->vq + d * p->kvd, p->vq + s * p->kvd, (uint64)rows * p->kvd);
    memmove(p->km + d * ng, p->km + s * ng, (uint64)rows * ng * sizeof(int32));
    memmove(p->vm + d * ng, p->vm + s * ng, (uint64)rows * ng * sizeof(int32));
    memmove(p->kxs + d * p->nkvh, p->kxs + s * p->nkvh, (uint64)rows * p->nkvh * sizeof(double));
    memmove(p->vxs + d * p->nkvh, p->vxs + s * p->nkvh, (uint64)rows * p->nkvh * sizeof(double));
  }
  memmove(p->ids + (uint64)to * B, p->ids + (uint64)from * B, rows * sizeof(int));
}

// ---------------------------------------------------------------- tables

void
llm_kv_close(struct llm_kvtable *t)
{
  while (t->n > 0)
    drop(t->pool, t->blk[--t->n]);
  t->pub = 0;
}

// Hold the longest chain of published blocks that matches ids[0..n) as
// t's first entries; returns its positions.
static int
take_chain(struct llm_kvtable *t, const int *ids, int n)
{
  struct llm_kvpool *p = t->pool;
  uint64 h = 0;
  int parent = -1;
  while ((t->n + 1) * B <= n) {
    const int *blk_ids = ids + t->n * B;
    h = chain_hash(p, h, blk_ids);
    int b = lookup(p, h, parent, blk_ids);
    if (b < 0)
      break;
    hold(p, b);
    t->blk[t->n++] = b;
    parent = b;
  }
  t->pub = t->n;
  return t->n * B;
}

int
llm_kv_open(struct llm_kvtable *t, const int *ids, int n, int total)
{
  struct llm_kvpool *p = t->pool;
  llm_kv_close(t);
  int cached = p->reuse ? take_chain(t, ids, n) : 0;
  if (cached == n) { // the whole prompt: compute its last position again
    int last = t->blk[t->n - 1], b = take_block(p);
    if (b < 0) {
      llm_kv_close(t);
      return -1;
    }
    copy_rows(p, b, last, B - 1);
    drop(p, last);
    t->blk[t->n - 1] = b;
    t->pub = t->n - 1;
    cached = n - 1;
  }
  while (t->n * B < total) {
    int b = take_block(p);
    if (b < 0) {
      llm_kv_close(t);
      return -1;
    }
    t->blk[t->n++] = b;
  }
  p->st.requests++;
  p->st.prompt += n;
  p->st.hits += cached;
  return cached;
}

void
llm_kv_publish(struct llm_kvtable *t, const int *seq, int fed)
{
  struct llm_kvpool *p = t->pool;
  if (!p->reuse)
    return;
  while (t->pub < t->n && (t->pub + 1) * B <= fed) {
    int i = t->pub, b = t->blk[i], parent = i > 0 ? t->blk[i - 1] : -1;
    uint64 h = chain_hash(p, i > 0 ? p->blk[parent].hash : 0, seq + i * B);
    memmove(p->ids + (uint64)b * B, seq + i * B, B * sizeof(int));
    int same = lookup(p, h, parent, seq + i * B);
    if (same >= 0) { // computed twice (two sequences at once): keep one
      hold(p, same);
      drop(p, b);
      t->blk[i] = same;
    } else
      publish(p, b, h, parent);
    t->pub++;
  }
}

// ---------------------------------------------------------------- the pool

int
llm_kv_init(struct llm_kvpool *p, const struct llm_config *g, int n_full, int nblocks, int reuse)
{
  memset(p, 0, sizeof(*p));
  uint64 rows = (uint64)nblocks * (n_full > 0 ? n_full : 1) * B;
  uint64 kvd = (uint64)g->n_kv_heads * g->head_dim;
  p->nblocks = nblocks;
  p->n_full = n_full;
  p->kvd = kvd;
  p->nkvh = g->n_kv_heads;
  p->reuse = reuse;
  p->hash_bits = 64;
  p->nbucket = nblocks;
  p->kq = malloc(rows * kvd);
  p->vq = malloc(rows * kvd);
  p->km = malloc(rows * (kvd / LLM_GS) * sizeof(int32));
  p->vm = malloc(rows * (kvd / LLM_GS) * sizeof(int32));
  p->kxs = malloc(rows * p->nkvh * sizeof(double));
  p->vxs = malloc(rows * p->nkvh * sizeof(double));
  p->ids = malloc((uint64)nblocks * B * sizeof(int));
  p->blk = malloc((uint64)nblocks * sizeof(struct llm_kvblock));
  p->bucket = malloc((uint64)nblocks * sizeof(int));
  if (!p->kq || !p->vq || !p->km || !p->vm || !p->kxs || !p->vxs || !p->ids || !p->blk ||
      !p->bucket) {
    llm_kv_free(p);
    return -1;
  }
  p->lru_old = p->lru_new = p->free_head = -1;
  for (int b = nblocks - 1; b >= 0; b--) {
    memset(&p->blk[b], 0, sizeof(p->blk[b]));
    p->bucket[b] = -1;
    free_push(p, b);
  }
  return 0;
}

// Frees p's buffers and clears p.
void
llm_kv_free(struct llm_kvpool *p)
{
  void *bufs[] = { p->kq, p->vq, p->km, p->vm, p->kxs, p->vxs, p->ids, p->blk, p->bucket };
  for (int i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
    free(bufs[i]);
  memset(p, 0, sizeof(*p));
}

void
llm_kv_print(const struct llm_kvpool *p, const char *what)
{
  const struct llm_kvstats *s = &p->st;
  fprintf(2,
      "%s: kvcache blocks=%d block_positions=%d reuse=%s used=%d cached=%d free=%d "
      "requests=%lu prompt=%lu hits=%lu evictions=%lu\n",
      what, p->nblocks, B, p->reuse ? "on" : "off", s->used, s->cached, s->free, s->requests,
      s->prompt, s->hits, s->evictions);
}
