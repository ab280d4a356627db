// Asset loading of the LLM runtime: CFG.BIN, then LTY.BIN, EMB.BIN,
// NRM.BIN, L00.BIN ... and ROP.BIN from the asset directory (the formats:
// docs/ASSET_FORMAT.md).
//
// CFG.BIN is checked field by field. Every other file is read with one
// large read() straight into the buffer it stays in (the disk costs about
// 25 us per request whatever its size: docs/PERF_NOTES.md, fact 6, "a disk
// request costs about 25 us"), or, for a version 4 model whose weights are
// stored in the layout the kernels read (llm_vec_block), the weight files
// are mapped read-only instead (mmap: nothing is read until the forward
// pass touches it, and every process shares the page cache's copy,
// docs/VM.md). The layer structs point into those buffers,
// except for the fp32 values (scales, norms, cos/sin, conv weights), which are
// widened to doubles once, here. Each file's size must equal the size its
// layout implies, so the layout code runs twice: once counting bytes (and the
// doubles to allocate), once handing out pointers. Every refusal names the
// file and the field.

#include "user/lib/user.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/param.h"
#include "kernel/include/stat.h"
#include "user/llm/loader.h"
#include "user/llm/kernels_vec.h"
#include "kernel/include/mman.h"

#define CFG_MAGIC    0x31474643u // "CFG1"
#define CFG_MAXBYTES 92          // the longest header (version 4)
#define MAXDIM       (1 << 20)   // bound on every size field (keeps products in range)
#define MAXNAME      16          // longest asset file name, "L149.BIN", with its NUL

const char *llm_prog = "llmrun";
int llm_map_weights = 1;

// ---------------------------------------------------------------- files

// Remember a new buffer of n bytes in rt, for llm_runtime_free; 0 if out
// of memory or of slots.
static void *
rt_alloc(struct llm_runtime *rt, uint64 n)
{
  if (rt->nbuf == LLM_MAXBUF)
    return 0;
  void *p = malloc(n ? n : 1);
  if (p)
    rt->buf[rt->nbuf++] = p;
  return p;
}

// Says that `what` did not fit and what to do; returns -1.
static int
out_of_memory(const char *what)
{
  fprintf(2,
      "%s: %s: out of memory; boot the guest with more RAM (e.g. make qemu-smol "
      "RAM=1G)\n",
      llm_prog, what);
  return -1;
}

// Read n bytes: a few large requests, straight into dst.
static int
read_full(int fd, uint8 *dst, uint64 n)
{
  uint64 done = 0;
  while (done < n) {
    uint64 want = n - done > (1u << 30) ? (1u << 30) : n - done;
    int r = read(fd, dst + done, (int)want);
    if (r <= 0)
      return r < 0 ? r : -EIO;
    done += r;
  }
  return 0;
}

// (contract in user/llm/loader.h)
int
llm_asset_dir_check(const char *dir)
{
  struct stat st = { 0 };
  int r = -ENAMETOOLONG;
  if (strlen(dir) + 1 + MAXNAME <= MAXPATH)
    r = open(dir, O_RDONLY);
  if (r >= 0) {
    int fd = r;
    r = fstat(fd, &st);
    if (r == 0 && st.type != T_DIR)
      r = -ENOTDIR;
    close(fd);
  }
  if (r < 0) {
    fprintf(2,
        "%s: %s: cannot enter the asset directory: %s "
        "(boot an image with the model: make qemu-smol / qemu-qwen, "
        "or pass --asset-dir DIR)\n",
        llm_prog, dir, strerror(r));
    return -1;
  }
  return 0;
}

// Open dir/name and check its size: exactly want bytes, or any size up to
// 4 KiB when want is 0 (CFG.BIN). Returns the descriptor with *size set,
// -ENOENT (no message) if optional and missing, or -1 after a message.
static int
open_asset(const char *dir, const char *name, uint64 want, int optional, uint64 *size)
{
  char path[MAXPATH];
  struct stat st = { 0 };
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    if (optional && fd == -ENOENT)
      return -ENOENT;
    fprintf(2, "%s: %s: cannot open: %s\n", llm_prog, name, strerror(fd));
    return -1;
  }
  int r = fstat(fd, &st);
  if (r == 0 && !want && st.size > 4096) {
    fprintf(2, "%s: %s: wrong size: %lu bytes, too long\n", llm_prog, name, st.size);
    r = -EINVAL;
  } else if (r == 0 && want && st.size != want) {
    fprintf(2, "%s: %s: wrong size: %lu bytes, expected %lu (%s)\n", llm_prog, name, st.size, want,
        st.size < want ? "truncated" : "too long");
    r = -EINVAL;
  }
  if (r < 0) {
    close(fd);
    return -1;
  }
  *size = st.size;
  return fd;
}

// Read n bytes of the open asset `name` into dst, then close it. Returns
// 0, or -1 after a message.
static int
read_asset(int fd, const char *name, uint8 *dst, uint64 n)
{
  int r = read_full(fd, dst, n);
  close(fd);
  if (r < 0) {
    fprintf(2, "%s: %s: read failed: %s\n", llm_prog, name, strerror(r));
    return -1;
  }
  return 0;
}

// Maps the open asset fd of size bytes read-only into *out, remembered in
// rt, and closes fd. Returns 0, or -1 (fd stays open) when it cannot be
// mapped (no mapping slot left): the caller reads it instead.
static int
map_asset(struct llm_runtime *rt, int fd, uint64 size, uint8 **out)
{
  if (rt->nmap == LLM_MAX_LAYERS + 1 || size == 0)
    return -1;
  uint8 *p = mmap(0, size, PROT_READ, MAP_SHARED, fd, 0);
  if ((long)p < 0)
    return -1;
  close(fd);
  rt->map[rt->nmap] = p;
  rt->maplen[rt->nmap++] = size;
  *out = p;
  return 0;
}

// Load dir/name, exactly want bytes, whole into a new buffer *out of rt.
// Returns 0, 1 if optional and missing, -1 after a message.
static int
load_file(struct llm_runtime *rt, const char *dir, const char *name, uint64 want, int optional,
    uint8 **out)
{
  uint64 size;
  int fd = open_asset(dir, name, want, optional, &size);
  if (fd == -ENOENT)
    return 1;
  if (fd < 0)
    return -1;
  if ((*out = rt_alloc(rt, size)) == 0) {
    close(fd);
    return out_of_memory(name);
  }
  return read_asset(fd, name, *out, size);
}

// Load weight file dir/name, exactly want bytes, into *out: mapped when
// rt->mapping (and a slot is left), else read into a new buffer. Returns
// 0, or -1 after a message.
static int
load_weights(struct llm_runtime *rt, const char *dir, const char *name, uint64 want, uint8 **out)
{
  uint64 size;
  if (!rt->mapping)
    return load_file(rt, dir, name, want, 0, out);
  int fd = open_asset(dir, name, want, 0, &size);
  if (fd < 0)
    return -1;
  if (map_asset(rt, fd, size, out) == 0)
    return 0;
  if ((*out = rt_alloc(rt, size)) == 0) {
    close(fd);
    return out_of_memory(name);
  }
  return read_asset(fd, name, *out, size);
}

// ---------------------------------------------------------------- CFG.BIN

// (contracts in user/llm/loader.h)
int
llm_conv_dim(const struct llm_config *g)
{
  return 2 * g->lin_k_heads * g->lin_k_dim + g->lin_v_heads * g->lin_v_dim;
}

// Little-endian u32 word i of p.
static uint32
u32at(const uint8 *p, int i)
{
  const uint8 *b = p + 4 * i;
  return b[0] | b[1] << 8 | b[2] << 16 | (uint32)b[3] << 24;
}

// Word i of p as a float.
static float
f32at(const uint8 *p, int i)
{
  union {
    uint32 u;
    float f;
  } v = { .u = u32at(p, i) };
  return v.f;
}

// Fill cfg from the words of a version 1, or version 2/3, header.
static void
cfg_decode(struct llm_config *c, const uint8 *p)
{
  c->version = u32at(p, 1);
  if (c->version == 1) {
    int *v1[] = { &c->dim, &c->hidden_dim, &c->n_layers, &c->n_heads, &c->n_kv_heads,
      &c->vocab_size, &c->seq_len, &c->runtime_seq_len };
    for (int i = 0; i < 8; i++)
      *v1[i] = u32at(p, 2 + i);
    c->rms_eps = f32at(p, 10);
    c->rope_theta = f32at(p, 11);
    c->head_dim = c->n_heads > 0 ? c->dim / c->n_heads : 0;
    c->rotary_dim = c->head_dim;
    return;
  }
  int *v2[] = { &c->model_kind, &c->flags, &c->dim, &c->hidden_dim, &c->n_layers, &c->n_heads,
    &c->n_kv_heads, &c->head_dim, &c->vocab_size, &c->seq_len, &c->runtime_seq_len };
  for (int i = 0; i < 11; i++)
    *v2[i] = u32at(p, 2 + i);
  c->rms_eps = f32at(p, 13);
  c->rope_theta = f32at(p, 14);
  int *v2b[] = { &c->rotary_dim, &c->lin_k_heads, &c->lin_v_heads, &c->lin_k_dim, &c->lin_v_dim,
    &c->conv_kernel };
  for (int i = 0; i < 6; i++)
    *v2b[i] = u32at(p, 15 + i);
  if (c->version >= 3)
    c->group_size = u32at(p, 21);
  if (c->version == 4)
    c->pack_rows = u32at(p, 22);
}

// Report a refused CFG.BIN field; returns -1.
static int
bad_field(const char *field, int value, const char *why)
{
  fprintf(2, "%s: CFG.BIN: field %s: %d %s\n", llm_prog, field, value, why);
  return -1;
}

// Every size field: positive and bounded. u32 fields above 2^31 read as
// negative ints, so one test covers them.
static int
cfg_check_sizes(const struct llm_config *c)
{
  struct {
    const char *name;
    int v;
  } f[] = {
    { "dim", c->dim },
    { "hidden_dim", c->hidden_dim },
    { "n_layers", c->n_layers },
    { "n_heads", c->n_heads },
    { "n_kv_heads", c->n_kv_heads },
    { "head_dim", c->head_dim },
    { "vocab_size", c->vocab_size },
    { "seq_len", c->seq_len },
    { "runtime_seq_len", c->runtime_seq_len },
    { "rotary_dim", c->rotary_dim },
  };
  for (int i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
    if (f[i].v <= 0)
      return bad_field(f[i].name, f[i].v, "must be > 0");
    if (f[i].v > MAXDIM)
      return bad_field(f[i].name, f[i].v, "is too large");
  }
  if (c->n_layers > LLM_MAX_LAYERS)
    return bad_field("n_layers", c->n_layers, "is too large");
  return 0;
}

// Lengths that get quantised in groups of 32 must be multiples of 32.
static int
cfg_check_groups(const struct llm_config *c)
{
  struct {
    const char *name;
    int v;
  } f[] = {
    { "dim", c->dim },
    { "hidden_dim", c->hidden_dim },
    { "head_dim", c->head_dim },
    { "linear_value_head_dim", c->lin_v_dim },
  };
  for (int i = 0; i < sizeof(f) / sizeof(f[0]); i++)
    if (f[i].v % LLM_GS)
      return bad_field(f[i].name, f[i].v, "is not a multiple of 32");
  return 0;
}

// The Gated DeltaNet fields: all zero (no linear layers) or all set, in
// range, value heads a multiple of key heads.
static int
cfg_check_linear(const struct llm_config *c)
{
  struct {
    const char *name;
    int v;
  } f[] = {
    { "linear_num_k_heads", c->lin_k_heads },
    { "linear_num_v_heads", c->lin_v_heads },
    { "linear_key_head_dim", c->lin_k_dim },
    { "linear_value_head_dim", c->lin_v_dim },
    { "linear_conv_kernel", c->conv_kernel },
  };
  int set = 0;
  for (int i = 0; i < 5; i++) {
    if (f[i].v < 0 || f[i].v > MAXDIM)
      return bad_field(f[i].name, f[i].v, "is out of range");
    set += f[i].v != 0;
  }
  if (set != 0 && set != 5)
    for (int i = 0; i < 5; i++)
      if (f[i].v == 0)
        return bad_field(f[i].name, 0, "is zero but other linear fields are set");
  if (set && c->lin_v_heads % c->lin_k_heads)
    return bad_field(
        "linear_num_v_heads", c->lin_v_heads, "is not a multiple of linear_num_k_heads");
  return 0;
}

// Every field of a decoded header, in a fixed order (the first refusal is
// reported); the model kind last but one.
static int
cfg_check(const struct llm_config *c, int model_kind)
{
  if (cfg_check_sizes(c) < 0 || cfg_check_linear(c) < 0)
    return -1;
  if (c->version == 1 && c->dim % c->n_heads)
    return bad_field("dim", c->dim, "is not a multiple of n_heads");
  if (c->head_dim % 2)
    return bad_field("head_dim", c->head_dim, "is odd");
  if (c->rotary_dim % 2)
    return bad_field("rotary_dim", c->rotary_dim, "is odd");
  if (c->rotary_dim > c->head_dim)
    return bad_field("rotary_dim", c->rotary_dim, "exceeds head_dim");
  if (c->n_heads % c->n_kv_heads)
    return bad_field("n_heads", c->n_heads, "is not a multiple of n_kv_heads");
  if (c->runtime_seq_len > c->seq_len)
    return bad_field("runtime_seq_len", c->runtime_seq_len, "exceeds seq_len");
  if (c->flags & ~3)
    return bad_field("flags", c->flags, "has unknown bits (known: 1, 2)");
  if (c->version >= 3 && c->group_size != LLM_GS)
    return bad_field("group_size", c->group_size, "is not 32");
  if (c->version == 4 && c->pack_rows != 0 && c->pack_rows != 16 && c->pack_rows != 32)
    return bad_field("pack_rows", c->pack_rows, "is not 0, 16 or 32");
  if (!(c->rms_eps > 0.0f))
    return bad_field("rms_eps", (int)c->rms_eps, "must be > 0");
  if (model_kind == LLM_MODEL_ANY && c->model_kind != LLM_MODEL_SMOL &&
      c->model_kind != LLM_MODEL_QWEN)
    return bad_field("model_kind", c->model_kind, "is unknown (0 smol/llama, 1 qwen)");
  if (model_kind != LLM_MODEL_ANY && c->model_kind != model_kind) {
    fprintf(2, "%s: CFG.BIN: field model_kind: %d (%s), but %s runs model_kind %d\n", llm_prog,
        c->model_kind, c->model_kind == LLM_MODEL_QWEN ? "qwen" : "smol/llama", llm_prog,
        model_kind);
    return -1;
  }
  return cfg_check_groups(c);
}

// Only the first CFG_MAXBYTES are read: a longer file is refused by its
// size alone.
int
llm_config_load(const char *dir, int model_kind, struct llm_config *c)
{
  static const int sizes[5] = { 0, 48, 84, 88, 92 };
  uint8 p[CFG_MAXBYTES];
  uint64 n;
  int fd = open_asset(dir, "CFG.BIN", 0, 0, &n);
  if (fd < 0 || read_asset(fd, "CFG.BIN", p, n < sizeof(p) ? n : sizeof(p)) < 0)
    return -1;
  if (n < 8) {
    fprintf(2, "%s: CFG.BIN: truncated: %lu bytes, the header alone is 8\n", llm_prog, n);
    return -1;
  }
  if (u32at(p, 0) != CFG_MAGIC) {
    fprintf(2, "%s: CFG.BIN: field magic: 0x%x, expected 0x%x (\"CFG1\")\n", llm_prog, u32at(p, 0),
        CFG_MAGIC);
    return -1;
  }
  uint32 v = u32at(p, 1);
  if (v < 1 || v > 4) {
    fprintf(2, "%s: CFG.BIN: field version: %u unsupported (1, 2, 3 or 4)\n", llm_prog, v);
    return -1;
  }
  if (n != sizes[v]) {
    fprintf(2, "%s: CFG.BIN: wrong size: %lu bytes, expected %d for version %u (%s)\n", llm_prog, n,
        sizes[v], v, n < sizes[v] ? "truncated" : "too long");
    return -1;
  }
  memset(c, 0, sizeof(*c));
  cfg_decode(c, p);
  return cfg_check(c, model_kind);
}

// ---------------------------------------------------------------- layouts

// Walks a file's layout. With base == 0 it only counts bytes (for the size
// check); otherwise it hands out pointers into the buffer, copying a piece
// to an aligned buffer when the packed layout leaves it misaligned (the
// matmul reads int8 weights 8 bytes at a time).
struct cursor {
  struct llm_runtime *rt;
  uint8 *base;
  uint64 off;
  int fail;
  double *dbl; // the widened floats (take_f64), ndbl of them so far
  uint64 ndbl;
};

// The next `bytes` of the layout, aligned to `align` (a power of 2): a
// pointer into the buffer, an aligned copy, or 0 when only counting.
static void *
take(struct cursor *c, uint64 bytes, int align)
{
  uint8 *p = c->base ? c->base + c->off : 0;
  c->off += bytes;
  if (p && ((uint64)p & (align - 1))) {
    uint8 *q = rt_alloc(c->rt, bytes);
    if (q == 0) {
      c->fail = 1;
      return 0;
    }
    memmove(q, p, bytes);
    p = q;
  }
  return p;
}

// The next n floats, widened to doubles (exactly) in the cursor's own
// buffer: the runtime reads these scales, norms and tables on every
// token, and a float-to-double conversion is a helper call under TCG.
// Version 4 stores them as doubles: a pointer into the file's buffer.
static const double *
take_f64(struct cursor *c, uint64 n)
{
  if (c->rt->cfg.version == 4)
    return take(c, 8 * n, 8);         // stored as doubles already
  const uint8 *f = take(c, 4 * n, 1); // read bytewise: no aligned copy
  double *d = c->dbl ? c->dbl + c->ndbl : 0;
  c->ndbl += n;
  if (f == 0 || d == 0)
    return 0;
  for (uint64 i = 0; i < n; i++)
    d[i] = (double)f32at(f, (int)i);
  return d;
}

// Between the counting pass and the second: rewind c and allocate the
// doubles the first pass counted.
static void
cursor_rewind(struct cursor *c)
{
  c->off = 0;
  c->dbl = rt_alloc(c->rt, c->ndbl * sizeof(double));
  c->ndbl = 0;
  if (c->dbl == 0)
    c->fail = 1;
}

// The n floats of a whole file's buffer p (NRM.BIN, ROP.BIN: fp32 in
// every version), widened.
static const double *
widen_file(struct llm_runtime *rt, uint8 *p, uint64 n)
{
  double *d = rt_alloc(rt, n * sizeof(double));
  for (uint64 i = 0; d && i < n; i++)
    d[i] = (double)f32at(p, (int)i);
  return d;
}

// Does a version 4 file's layout (blocks of pack_rows rows) fit the
// kernels this process runs, so that its weights are used as they are?
static int
layout_fits(const struct llm_config *g)
{
  return g->version == 4 && g->pack_rows == llm_vec_block();
}

// Plain row-major int8 weights m->q: repacked for the vector kernels, or
// offset for the scalar ones.
static void
prepare_weights(struct cursor *c, struct llm_qmat *m)
{
  m->vrows = 0;
  uint64 n = m->q ? llm_vec_wm_bytes(m) : 0;
  if (n > 0) {
    int32 *vwm = rt_alloc(c->rt, n);
    if (vwm == 0 || llm_vec_pack(m, vwm) < 0)
      c->fail = 1;
  }
  if (m->q)
    llm_qmat_offset(m);
}

// Version 4's part of a qmat after the group multipliers: the packed
// rows' multipliers as int32, then the weights in the layout of blocks of
// pack_rows rows (docs/ASSET_FORMAT.md). When that is the kernels' layout
// the qmat points at them as they are (the mapped case); else they are
// turned back into plain rows, and prepared as version 3's are.
static void
take_packed(struct cursor *c, struct llm_qmat *m)
{
  int B = c->rt->cfg.pack_rows;
  uint64 packed = B ? (uint64)(m->rows / B) * B : 0;
  const int32 *vm = take(c, 4 * packed * (m->cols / LLM_GS), 4);
  m->q = take(c, (uint64)m->rows * m->cols, 8);
  m->vrows = 0;
  m->vwm = 0;
  if (m->q == 0)
    return;
  if (layout_fits(&c->rt->cfg)) {
    m->vrows = packed;
    m->vwm = packed ? vm : 0;
    return;
  }
  if (llm_vec_unpack((int8 *)m->q, m->rows, m->cols, B) < 0)
    c->fail = 1;
  else
    prepare_weights(c, m);
}

// The next qmat of rows x cols: row scales, group multipliers (version 3
// and 4), int8 weights (repacked for the vector kernels or offset for the
// scalar ones; version 4 stores them so).
static void
take_qmat(struct cursor *c, struct llm_qmat *m, int rows, int cols)
{
  m->rows = rows;
  m->cols = cols;
  m->ws = take_f64(c, rows);
  m->wm = 0;
  if (c->rt->cfg.version == 3)
    m->wm = take(c, 2ul * rows * (cols / LLM_GS), 2);
  if (c->rt->cfg.version == 4) {
    m->wm = take(c, (2ul * rows * (cols / LLM_GS) + 7) & ~7ul, 8); // padded to 8 bytes
    take_packed(c, m);
    return;
  }
  m->q = take(c, (uint64)rows * cols, 8);
  prepare_weights(c, m);
}

// The MLP of a layer: gate, up, down.
static void
take_ffn(struct cursor *c, struct llm_layer *L)
{
  struct llm_config *g = &c->rt->cfg;
  take_qmat(c, &L->gate, g->hidden_dim, g->dim);
  take_qmat(c, &L->up, g->hidden_dim, g->dim);
  take_qmat(c, &L->down, g->dim, g->hidden_dim);
}

// The full-attention part of a layer: q/k norms (if flagged), Wq Wk Wv Wo.
static void
take_full(struct cursor *c, struct llm_layer *L)
{
  struct llm_config *g = &c->rt->cfg;
  int hd = g->head_dim;
  if (g->flags & LLM_QKNORM) {
    L->q_norm = take_f64(c, hd);
    L->k_norm = take_f64(c, hd);
  }
  take_qmat(c, &L->wq, g->n_heads * hd * (g->flags & LLM_GATED ? 2 : 1), g->dim);
  take_qmat(c, &L->wk, g->n_kv_heads * hd, g->dim);
  take_qmat(c, &L->wv, g->n_kv_heads * hd, g->dim);
  take_qmat(c, &L->wo, g->dim, g->n_heads * hd);
}

// The Gated DeltaNet part of a layer.
static void
take_linear(struct cursor *c, struct llm_layer *L)
{
  struct llm_config *g = &c->rt->cfg;
  int vdim = g->lin_v_heads * g->lin_v_dim;
  L->conv_w = take_f64(c, (uint64)llm_conv_dim(g) * g->conv_kernel);
  L->dt_bias = take_f64(c, g->lin_v_heads);
  L->a_log = take_f64(c, g->lin_v_heads);
  L->norm = take_f64(c, g->lin_v_dim);
  take_qmat(c, &L->qkv, llm_conv_dim(g), g->dim);
  take_qmat(c, &L->z, vdim, g->dim);
  take_qmat(c, &L->a, g->lin_v_heads, g->dim);
  take_qmat(c, &L->b, g->lin_v_heads, g->dim);
  take_qmat(c, &L->out, g->dim, vdim);
}

// Layout of Lxx.BIN (docs/ASSET_FORMAT.md, section 6), for both kinds.
static void
take_layer(struct cursor *c, struct llm_layer *L)
{
  L->input_norm = take_f64(c, c->rt->cfg.dim);
  L->post_norm = take_f64(c, c->rt->cfg.dim);
  if (L->kind == LLM_LAYER_FULL)
    take_full(c, L);
  else
    take_linear(c, L);
  take_ffn(c, L);
}

// ---------------------------------------------------------------- loading

// LTY.BIN: u32 count (= n_layers), then one u32 kind per layer. Optional
// for Smol (absent: all full attention), required for Qwen.
static int
load_kinds(struct llm_runtime *rt, const char *dir, int model_kind)
{
  struct llm_config *g = &rt->cfg;
  uint8 *p;
  int r = load_file(rt, dir, "LTY.BIN", 4 + 4ul * g->n_layers, model_kind == LLM_MODEL_SMOL, &p);
  if (r == 1)
    return 0;
  if (r < 0) {
    if (model_kind == LLM_MODEL_QWEN)
      fprintf(2, "%s: LTY.BIN: required for Qwen (model_kind 1)\n", llm_prog);
    return -1;
  }
  if (u32at(p, 0) != g->n_layers) {
    fprintf(2, "%s: LTY.BIN: field count: %u, expected n_layers %d\n", llm_prog, u32at(p, 0),
        g->n_layers);
    return -1;
  }
  for (int l = 0; l < g->n_layers; l++) {
    uint32 k = u32at(p, 1 + l);
    int linear = k == LLM_LAYER_DELTANET;
    if (k > LLM_LAYER_DELTANET ||
        (linear && (model_kind == LLM_MODEL_SMOL || g->lin_k_heads == 0))) {
      fprintf(2,
          "%s: LTY.BIN: field kind of layer %d: %u not allowed here "
          "(0 full attention; 1 linear, Qwen with linear fields only)\n",
          llm_prog, l, k);
      return -1;
    }
    rt->layers[l].kind = k;
  }
  return 0;
}

// L00.BIN ...: each layer's weights, its size given by its kind; numbers
// each layer among the layers of its kind (rt->slot).
static int
load_layers(struct llm_runtime *rt, const char *dir)
{
  struct llm_config *g = &rt->cfg;
  for (int l = 0; l < g->n_layers; l++) {
    struct llm_layer *L = &rt->layers[l];
    struct cursor c = { rt, 0, 0, 0, 0, 0 };
    char name[MAXNAME];
    snprintf(name, sizeof(name), "L%02d.BIN", l);
    take_layer(&c, L);
    if (load_weights(rt, dir, name, c.off, &c.base) < 0)
      return -1;
    cursor_rewind(&c);
    take_layer(&c, L);
    if (c.fail)
      return out_of_memory(name);
    rt->slot[l] = L->kind == LLM_LAYER_DELTANET ? rt->n_linear++ : rt->n_full++;
  }
  return 0;
}

// EMB.BIN (one qmat), NRM.BIN (dim floats), ROP.BIN (cos/sin table).
static int
load_tables(struct llm_runtime *rt, const char *dir)
{
  struct llm_config *g = &rt->cfg;
  struct cursor c = { rt, 0, 0, 0, 0, 0 };
  uint8 *p;
  take_qmat(&c, &rt->emb, g->vocab_size, g->dim);
  if (load_weights(rt, dir, "EMB.BIN", c.off, &c.base) < 0)
    return -1;
  cursor_rewind(&c);
  take_qmat(&c, &rt->emb, g->vocab_size, g->dim);
  if (load_file(rt, dir, "NRM.BIN", 4ul * g->dim, 0, &p) < 0)
    return -1;
  rt->final_norm = widen_file(rt, p, g->dim);
  uint64 nrope = (uint64)g->runtime_seq_len * g->rotary_dim;
  if (load_file(rt, dir, "ROP.BIN", 4 * nrope, 0, &p) < 0)
    return -1;
  rt->rope = widen_file(rt, p, nrope);
  if (c.fail || rt->final_norm == 0 || rt->rope == 0)
    return out_of_memory("EMB.BIN, NRM.BIN, ROP.BIN");
  return 0;
}

int
llm_runtime_init(struct llm_runtime *rt, const char *dir, int model_kind)
{
  memset(rt, 0, sizeof(*rt));
  llm_math_init();
  if (llm_config_load(dir, model_kind, &rt->cfg) < 0)
    return -1;
  // With vector kernels the block size is known now (llm_vec_block):
  // llm_kernels_select ran before.
  rt->mapping = llm_map_weights && layout_fits(&rt->cfg);
  int nl = rt->cfg.n_layers;
  rt->layers = rt_alloc(rt, nl * sizeof(struct llm_layer));
  rt->slot = rt_alloc(rt, nl * sizeof(int));
  if (rt->layers == 0 || rt->slot == 0)
    return out_of_memory("the layer table");
  memset(rt->layers, 0, nl * sizeof(struct llm_layer));
  if (load_kinds(rt, dir, model_kind) < 0 || load_tables(rt, dir) < 0)
    return -1;
  return load_layers(rt, dir);
}

// Free every buffer of rt and drop its mappings (its layers point into
// them). A munmap refused while the thread pool runs (-EBUSY) leaves that
// mapping to the process's exit.
void
llm_runtime_free(struct llm_runtime *rt)
{
  while (rt->nbuf > 0)
    free(rt->buf[--rt->nbuf]);
  while (rt->nmap > 0) {
    rt->nmap--;
    munmap(rt->map[rt->nmap], rt->maplen[rt->nmap]);
  }
}
