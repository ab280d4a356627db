// The shared LLM runtime: load and check the model assets, set up a
// session, validate and serve requests, and time them.
//
// Loading (llm_runtime_init): CFG.BIN first, checked field by field, then
// LTY.BIN, EMB.BIN, NRM.BIN, L00.BIN ... and ROP.BIN. Each file is read
// with one large read() straight into the buffer it stays in (the disk
// costs about 25 us per request whatever its size, PERF_NOTES.md 6), and the
// layer structs point into those buffers. Each file's size must equal the
// size its layout implies; every refusal names the file and the field.
//
// Serving (llm_session_run -> llm_drive_decode): prefill runs the prompt
// through the layers LLM_BATCH positions at a time, the head gives the
// first token; decode then feeds back one token per step (greedy).
// Timing, on one stderr line per request:
//   PROG: timing load_us=L init_us=I ttft_us=F tpot_us=P prompt=N gen=G
// load_us: llm_runtime_init; init_us: session_init (which includes the
// load); ttft_us: request start to the first generated token; tpot_us: mean
// time of each following token (0 when G is 1). With --profile, two more
// lines split the prefill and the decode time into matmuls (quantising
// their inputs included), attention (for Qwen also the Gated DeltaNet
// recurrence) and the rest:
//   PROG: profile phase=prefill matmul_us=M attn_us=A other_us=O tokens=N
//   PROG: profile phase=decode matmul_us=M attn_us=A other_us=O tokens=G-1

#include "user/lib/user.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/stat.h"
#include "user/llm/runtime.h"

#define CFG_MAGIC 0x31474643u // "CFG1"
#define MAXDIM    (1 << 20)   // bound on every size field (keeps products in range)

const char *llm_prog = "llmrun";
void (*llm_token_hook)(int i, int id);

// ---------------------------------------------------------------- files

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

// Load file `name` whole into a new buffer. want != 0: its size must be
// exactly want (0: any size up to 4 KiB, for CFG.BIN). Returns 0, 1 if
// optional and missing, -1 after a message.
static int
load_file(struct llm_runtime *rt, const char *name, uint64 want,
    int optional, uint8 **out, uint64 *size)
{
  struct stat st = { 0 };
  int fd = open(name, O_RDONLY);
  if (fd < 0) {
    if (optional && fd == -ENOENT)
      return 1;
    fprintf(2, "%s: %s: cannot open: %s\n", llm_prog, name, strerror(fd));
    return -1;
  }
  int r = fstat(fd, &st);
  if (r == 0 && !want && st.size > 4096) {
    fprintf(2, "%s: %s: wrong size: %lu bytes, too long\n", llm_prog, name, st.size);
    r = -EINVAL;
  } else if (r == 0 && want && st.size != want) {
    fprintf(2, "%s: %s: wrong size: %lu bytes, expected %lu (%s)\n", llm_prog,
        name, st.size, want, st.size < want ? "truncated" : "too long");
    r = -EINVAL;
  } else if (r == 0 && (*out = rt_alloc(rt, st.size)) == 0) {
    fprintf(2, "%s: %s: out of memory for %lu bytes\n", llm_prog, name, st.size);
    r = -ENOMEM;
  } else if (r == 0 && (r = read_full(fd, *out, st.size)) < 0) {
    fprintf(2, "%s: %s: read failed: %s\n", llm_prog, name, strerror(r));
  }
  close(fd);
  if (size)
    *size = st.size;
  return r < 0 ? -1 : 0;
}

// ---------------------------------------------------------------- CFG.BIN

static uint32
u32at(const uint8 *p, int i)
{
  const uint8 *b = p + 4 * i;
  return b[0] | b[1] << 8 | b[2] << 16 | (uint32)b[3] << 24;
}

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
    int *v1[] = { &c->dim, &c->hidden_dim, &c->n_layers, &c->n_heads,
      &c->n_kv_heads, &c->vocab_size, &c->seq_len, &c->runtime_seq_len };
    for (int i = 0; i < 8; i++)
      *v1[i] = u32at(p, 2 + i);
    c->rms_eps = f32at(p, 10);
    c->rope_theta = f32at(p, 11);
    c->head_dim = c->n_heads > 0 ? c->dim / c->n_heads : 0;
    c->rotary_dim = c->head_dim;
    return;
  }
  int *v2[] = { &c->model_kind, &c->flags, &c->dim, &c->hidden_dim,
    &c->n_layers, &c->n_heads, &c->n_kv_heads, &c->head_dim,
    &c->vocab_size, &c->seq_len, &c->runtime_seq_len };
  for (int i = 0; i < 11; i++)
    *v2[i] = u32at(p, 2 + i);
  c->rms_eps = f32at(p, 13);
  c->rope_theta = f32at(p, 14);
  int *v2b[] = { &c->rotary_dim, &c->lin_k_heads, &c->lin_v_heads,
    &c->lin_k_dim, &c->lin_v_dim, &c->conv_kernel };
  for (int i = 0; i < 6; i++)
    *v2b[i] = u32at(p, 15 + i);
  if (c->version == 3)
    c->group_size = u32at(p, 21);
}

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
  if (c->n_layers > LLM_MAXBUF / 2)
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
    return bad_field("linear_num_v_heads", c->lin_v_heads,
        "is not a multiple of linear_num_k_heads");
  return 0;
}

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
  if (c->version == 3 && c->group_size != LLM_GS)
    return bad_field("group_size", c->group_size, "is not 32");
  if (!(c->rms_eps > 0.0f))
    return bad_field("rms_eps", (int)c->rms_eps, "must be > 0");
  if (c->model_kind != model_kind) {
    fprintf(2, "%s: CFG.BIN: field model_kind: %d (%s), but %s runs model_kind %d\n",
        llm_prog, c->model_kind, c->model_kind == 1 ? "qwen" : "smol/llama",
        llm_prog, model_kind);
    return -1;
  }
  return cfg_check_groups(c);
}

static int
load_config(struct llm_runtime *rt, int model_kind)
{
  static const int sizes[4] = { 0, 48, 84, 88 };
  struct llm_config *c = &rt->cfg;
  uint8 *p;
  uint64 n;
  if (load_file(rt, "CFG.BIN", 0, 0, &p, &n) < 0)
    return -1;
  if (n < 8) {
    fprintf(2, "%s: CFG.BIN: truncated: %lu bytes, the header alone is 8\n", llm_prog, n);
    return -1;
  }
  if (u32at(p, 0) != CFG_MAGIC) {
    fprintf(2, "%s: CFG.BIN: field magic: 0x%x, expected 0x%x (\"CFG1\")\n",
        llm_prog, u32at(p, 0), CFG_MAGIC);
    return -1;
  }
  uint32 v = u32at(p, 1);
  if (v < 1 || v > 3) {
    fprintf(2, "%s: CFG.BIN: field version: %u unsupported (1, 2 or 3)\n", llm_prog, v);
    return -1;
  }
  if (n != sizes[v]) {
    fprintf(2, "%s: CFG.BIN: wrong size: %lu bytes, expected %d for version %u (%s)\n",
        llm_prog, n, sizes[v], v, n < sizes[v] ? "truncated" : "too long");
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
};

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

static const float *
take_f32(struct cursor *c, uint64 n)
{
  return take(c, 4 * n, 4);
}

static void
take_qmat(struct cursor *c, struct llm_qmat *m, int rows, int cols)
{
  m->rows = rows;
  m->cols = cols;
  m->ws = take_f32(c, rows);
  m->wm = 0;
  if (c->rt->cfg.version == 3)
    m->wm = take(c, 2ul * rows * (cols / LLM_GS), 2);
  m->q = take(c, (uint64)rows * cols, 8);
}

static void
take_ffn(struct cursor *c, struct llm_layer *L)
{
  struct llm_config *g = &c->rt->cfg;
  take_qmat(c, &L->gate, g->hidden_dim, g->dim);
  take_qmat(c, &L->up, g->hidden_dim, g->dim);
  take_qmat(c, &L->down, g->dim, g->hidden_dim);
}

static void
take_full(struct cursor *c, struct llm_layer *L)
{
  struct llm_config *g = &c->rt->cfg;
  int hd = g->head_dim;
  if (g->flags & LLM_QKNORM) {
    L->q_norm = take_f32(c, hd);
    L->k_norm = take_f32(c, hd);
  }
  take_qmat(c, &L->wq, g->n_heads * hd * (g->flags & LLM_GATED ? 2 : 1), g->dim);
  take_qmat(c, &L->wk, g->n_kv_heads * hd, g->dim);
  take_qmat(c, &L->wv, g->n_kv_heads * hd, g->dim);
  take_qmat(c, &L->wo, g->dim, g->n_heads * hd);
}

static int
conv_dim(const struct llm_config *g)
{
  return 2 * g->lin_k_heads * g->lin_k_dim + g->lin_v_heads * g->lin_v_dim;
}

static void
take_linear(struct cursor *c, struct llm_layer *L)
{
  struct llm_config *g = &c->rt->cfg;
  int vdim = g->lin_v_heads * g->lin_v_dim;
  L->conv_w = take_f32(c, (uint64)conv_dim(g) * g->conv_kernel);
  L->dt_bias = take_f32(c, g->lin_v_heads);
  L->a_log = take_f32(c, g->lin_v_heads);
  L->norm = take_f32(c, g->lin_v_dim);
  take_qmat(c, &L->qkv, conv_dim(g), g->dim);
  take_qmat(c, &L->z, vdim, g->dim);
  take_qmat(c, &L->a, g->lin_v_heads, g->dim);
  take_qmat(c, &L->b, g->lin_v_heads, g->dim);
  take_qmat(c, &L->out, g->dim, vdim);
}

// Layout of Lxx.BIN (ASSET_FORMAT.md), for both kinds.
static void
take_layer(struct cursor *c, struct llm_layer *L)
{
  L->input_norm = take_f32(c, c->rt->cfg.dim);
  L->post_norm = take_f32(c, c->rt->cfg.dim);
  if (L->kind == 0)
    take_full(c, L);
  else
    take_linear(c, L);
  take_ffn(c, L);
}

// ---------------------------------------------------------------- loading

// LTY.BIN: u32 count (= n_layers), then one u32 kind per layer.
static int
load_kinds(struct llm_runtime *rt, int model_kind)
{
  struct llm_config *g = &rt->cfg;
  uint8 *p;
  int r = load_file(rt, "LTY.BIN", 4 + 4ul * g->n_layers, model_kind == 0, &p, 0);
  if (r == 1)
    return 0; // Smol: absent means all full attention
  if (r < 0) {
    if (model_kind == 1)
      fprintf(2, "%s: LTY.BIN: required for Qwen (model_kind 1)\n", llm_prog);
    return -1;
  }
  if (u32at(p, 0) != g->n_layers) {
    fprintf(2, "%s: LTY.BIN: field count: %u, expected n_layers %d\n",
        llm_prog, u32at(p, 0), g->n_layers);
    return -1;
  }
  for (int l = 0; l < g->n_layers; l++) {
    uint32 k = u32at(p, 1 + l);
    if (k > 1 || (k == 1 && (model_kind == 0 || g->lin_k_heads == 0))) {
      fprintf(2, "%s: LTY.BIN: field kind of layer %d: %u not allowed here "
                 "(0 full attention; 1 linear, Qwen with linear fields only)\n",
          llm_prog, l, k);
      return -1;
    }
    rt->layers[l].kind = k;
  }
  return 0;
}

static int
load_layers(struct llm_runtime *rt)
{
  struct llm_config *g = &rt->cfg;
  for (int l = 0; l < g->n_layers; l++) {
    struct llm_layer *L = &rt->layers[l];
    struct cursor c = { rt, 0, 0, 0 };
    char name[16];
    snprintf(name, sizeof(name), "L%02d.BIN", l);
    take_layer(&c, L);
    if (load_file(rt, name, c.off, 0, &c.base, 0) < 0)
      return -1;
    c.off = 0;
    take_layer(&c, L);
    if (c.fail) {
      fprintf(2, "%s: %s: out of memory\n", llm_prog, name);
      return -1;
    }
    rt->slot[l] = L->kind ? rt->n_linear++ : rt->n_full++;
  }
  return 0;
}

// EMB.BIN (one qmat), NRM.BIN (dim floats), ROP.BIN (cos/sin table).
static int
load_tables(struct llm_runtime *rt)
{
  struct llm_config *g = &rt->cfg;
  struct cursor c = { rt, 0, 0, 0 };
  uint8 *p;
  take_qmat(&c, &rt->emb, g->vocab_size, g->dim);
  if (load_file(rt, "EMB.BIN", c.off, 0, &c.base, 0) < 0)
    return -1;
  c.off = 0;
  take_qmat(&c, &rt->emb, g->vocab_size, g->dim);
  if (load_file(rt, "NRM.BIN", 4ul * g->dim, 0, &p, 0) < 0)
    return -1;
  rt->final_norm = (const float *)p;
  if (load_file(rt, "ROP.BIN", 4ul * g->runtime_seq_len * g->rotary_dim, 0, &p, 0) < 0)
    return -1;
  rt->rope = (const float *)p;
  return c.fail ? -1 : 0;
}

// Load the model from the current directory. Returns 0, or -1 after a
// message (the caller then calls llm_runtime_free).
int
llm_runtime_init(struct llm_runtime *rt, int model_kind)
{
  memset(rt, 0, sizeof(*rt));
  if (load_config(rt, model_kind) < 0)
    return -1;
  int nl = rt->cfg.n_layers;
  rt->layers = rt_alloc(rt, nl * sizeof(struct llm_layer));
  rt->slot = rt_alloc(rt, nl * sizeof(int));
  if (rt->layers == 0 || rt->slot == 0) {
    fprintf(2, "%s: out of memory\n", llm_prog);
    return -1;
  }
  memset(rt->layers, 0, nl * sizeof(struct llm_layer));
  if (load_kinds(rt, model_kind) < 0 || load_tables(rt) < 0)
    return -1;
  return load_layers(rt);
}

void
llm_runtime_free(struct llm_runtime *rt)
{
  while (rt->nbuf > 0)
    free(rt->buf[--rt->nbuf]);
}

// ---------------------------------------------------------------- session

static void *
s_alloc(struct llm_session *s, uint64 n)
{
  void *p = 0;
  if (s->nbuf < sizeof(s->buf) / sizeof(s->buf[0]))
    p = malloc(n ? n : 1);
  if (p)
    s->buf[s->nbuf++] = p;
  else
    s->oom = 1;
  return p;
}

static int
max2(int a, int b)
{
  return a > b ? a : b;
}

// The KV cache, the Gated DeltaNet state and the workspace.
static int
session_alloc(struct llm_session *s, const struct llm_runtime *rt)
{
  const struct llm_config *g = &rt->cfg;
  uint64 T = g->runtime_seq_len, B = LLM_BATCH;
  uint64 kv = (uint64)g->n_kv_heads * g->head_dim, nf = rt->n_full;
  uint64 vdim = (uint64)g->lin_v_heads * g->lin_v_dim;
  int maxin = max2(max2(g->dim, g->hidden_dim), max2(g->n_heads * g->head_dim, vdim));
  int maxout = max2(max2(maxin, 2 * g->n_heads * g->head_dim), conv_dim(g));
  s->kq = s_alloc(s, nf * T * kv);
  s->vq = s_alloc(s, nf * T * kv);
  s->km = s_alloc(s, nf * T * (kv / LLM_GS) * sizeof(int32));
  s->vm = s_alloc(s, nf * T * (kv / LLM_GS) * sizeof(int32));
  s->kxs = s_alloc(s, nf * T * g->n_kv_heads * sizeof(double));
  s->vxs = s_alloc(s, nf * T * g->n_kv_heads * sizeof(double));
  s->conv = s_alloc(s, rt->n_linear * (uint64)max2(g->conv_kernel - 1, 0) * conv_dim(g) * sizeof(double));
  s->state = s_alloc(s, rt->n_linear * (uint64)g->lin_v_heads * g->lin_k_dim * g->lin_v_dim * sizeof(double));
  s->seq = s_alloc(s, T * sizeof(int));
  s->x = s_alloc(s, B * g->dim * sizeof(double));
  s->xn = s_alloc(s, B * maxin * sizeof(double));
  s->y1 = s_alloc(s, B * maxout * sizeof(double));
  s->y2 = s_alloc(s, B * maxout * sizeof(double));
  s->y3 = s_alloc(s, B * maxout * sizeof(double));
  s->att = s_alloc(s, B * maxin * sizeof(double));
  s->act.q = s_alloc(s, B * maxin);
  s->act.m = s_alloc(s, B * (maxin / LLM_GS) * sizeof(int32));
  s->act.xs = s_alloc(s, B * sizeof(double));
  s->act.pairs = s_alloc(s, (uint64)maxin * LLM_PAIRS * sizeof(int64));
  s->hq = s_alloc(s, g->head_dim);
  s->hm = s_alloc(s, (g->head_dim / LLM_GS) * sizeof(int32));
  s->d = s_alloc(s, T * sizeof(int64));
  s->score = s_alloc(s, T * sizeof(double));
  s->wt = s_alloc(s, T * sizeof(double));
  s->wq = s_alloc(s, T * sizeof(int32));
  s->scratch = s_alloc(s, (uint64)maxout * sizeof(double));
  s->logits = s_alloc(s, (uint64)g->vocab_size * sizeof(double));
  return s->oom ? -1 : 0;
}

// Enter dir, load the model, allocate the session. Returns 0, or -1 after
// a message with everything freed.
int
session_init(struct llm_session *s, struct llm_runtime *rt, const char *dir,
    int model_kind)
{
  uint64 t0 = time_us();
  memset(s, 0, sizeof(*s));
  int r = chdir(dir);
  if (r < 0) {
    fprintf(2, "%s: %s: cannot enter the asset directory: %s "
               "(boot an image with the model: make qemu-smol / qemu-qwen, "
               "or pass --asset-dir DIR)\n",
        llm_prog, dir, strerror(r));
    return -1;
  }
  uint64 t1 = time_us();
  if (llm_runtime_init(rt, model_kind) < 0) {
    llm_runtime_free(rt);
    return -1;
  }
  s->tm.load_us = time_us() - t1;
  if (session_alloc(s, rt) < 0) {
    fprintf(2, "%s: out of memory for the KV cache and workspace\n", llm_prog);
    session_free(s, rt);
    return -1;
  }
  s->tm.init_us = time_us() - t0;
  return 0;
}

void
session_free(struct llm_session *s, struct llm_runtime *rt)
{
  while (s->nbuf > 0)
    free(s->buf[--s->nbuf]);
  llm_runtime_free(rt);
}

// ---------------------------------------------------------------- requests

uint64
llm_clock(struct llm_session *s)
{
  return s->tm.profile ? time_us() : 0;
}

void
llm_charge(struct llm_session *s, uint64 *part, uint64 since)
{
  if (s->tm.profile)
    *part += time_us() - since;
}

static void
profile_line(const char *phase, struct llm_session *s, uint64 total, int tokens)
{
  struct llm_timing *t = &s->tm;
  uint64 known = t->matmul_us + t->attn_us;
  fprintf(2, "%s: profile phase=%s matmul_us=%lu attn_us=%lu other_us=%lu tokens=%d\n",
      llm_prog, phase, t->matmul_us, t->attn_us,
      total > known ? total - known : 0, tokens);
  t->matmul_us = t->attn_us = 0;
}

// Prefill, then greedy decode. The course's loop runs `pos` over every
// position and starts writing results once pos >= n - 1; here the prompt
// positions go through the layers in batches (the head only at the last
// one), and each generated token is fed back at the next position.
// s->seq[0..n) holds the prompt; the predict tokens land in s->seq[n..).
int
llm_drive_decode(const struct llm_model *md, struct llm_runtime *rt,
    struct llm_session *s, int n, int predict, uint64 t0,
    uint64 *ttft, uint64 *tpot)
{
  int c = 0;
  for (int pos = 0; pos < n; pos += c) { // prefill
    c = n - pos < LLM_BATCH ? n - pos : LLM_BATCH;
    md->forward(rt, s, pos, c);
  }
  s->seq[n] = llm_head(rt, s, c - 1); // the first generated token
  uint64 t1 = time_us();
  if (llm_token_hook)
    llm_token_hook(0, s->seq[n]);
  *ttft = t1 - t0;
  if (s->tm.profile)
    profile_line("prefill", s, *ttft, n);
  for (int i = 1; i < predict; i++) { // decode
    int pos = n + i - 1;
    md->forward(rt, s, pos, 1);
    s->seq[pos + 1] = llm_head(rt, s, 0);
    if (llm_token_hook)
      llm_token_hook(i, s->seq[pos + 1]);
  }
  uint64 t2 = time_us();
  *tpot = predict > 1 ? (t2 - t1) / (predict - 1) : 0;
  if (s->tm.profile)
    profile_line("decode", s, t2 - t1, predict - 1);
  return 0;
}

// Check a request against the limits; -1 after a message naming the limit.
static int
request_check(const struct llm_config *g, const int *ids, int n, int predict)
{
  if (n < 1) {
    fprintf(2, "%s: request: empty prompt (at least 1 id)\n", llm_prog);
    return -1;
  }
  if (n > LLM_MAX_PROMPT) {
    fprintf(2, "%s: request: prompt of %d ids exceeds the limit of %d prompt ids\n",
        llm_prog, n, LLM_MAX_PROMPT);
    return -1;
  }
  if (predict < 1) {
    fprintf(2, "%s: request: predict %d: must be at least 1\n", llm_prog, predict);
    return -1;
  }
  if (n + predict > g->runtime_seq_len) {
    fprintf(2, "%s: request: prompt %d + predict %d = %d exceeds runtime_seq_len %d\n",
        llm_prog, n, predict, n + predict, g->runtime_seq_len);
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= g->vocab_size) {
      fprintf(2, "%s: request: id %d at prompt position %d is not below vocab_size %d\n",
          llm_prog, ids[i], i, g->vocab_size);
      return -1;
    }
  return 0;
}

// Print the generated ids on one stdout line.
static void
print_ids(const int *ids, int n)
{
  char line[512];
  int len = 0;
  for (int i = 0; i < n; i++) {
    if (len > (int)sizeof(line) - 16) {
      write(1, line, len);
      len = 0;
    }
    len += snprintf(line + len, sizeof(line) - len, i ? " %d" : "%d", ids[i]);
  }
  line[len++] = '\n';
  write(1, line, len);
}

// Validate one request and generate: the ids land in s->seq[n..n+predict).
// Returns 0, or -1 after a message.
int
llm_session_generate(const struct llm_model *md, struct llm_runtime *rt,
    struct llm_session *s, const int *ids, int n, int predict,
    uint64 *ttft, uint64 *tpot)
{
  uint64 t0 = time_us();
  if (request_check(&rt->cfg, ids, n, predict) < 0)
    return -1;
  memmove(s->seq, ids, n * sizeof(int));
  return llm_drive_decode(md, rt, s, n, predict, t0, ttft, tpot);
}

// Validate and serve one request. Returns 0, or -1 after a message.
int
llm_session_run(const struct llm_model *md, struct llm_runtime *rt,
    struct llm_session *s, const int *ids, int n, int predict,
    int quiet)
{
  uint64 ttft, tpot;
  if (llm_session_generate(md, rt, s, ids, n, predict, &ttft, &tpot) < 0)
    return -1;
  if (llm_token_hook == 0) // else the hook has written them (llm_cli's --stream)
    print_ids(s->seq + n, predict);
  if (!quiet)
    fprintf(2, "%s: timing load_us=%lu init_us=%lu ttft_us=%lu tpot_us=%lu "
               "prompt=%d gen=%d\n",
        llm_prog, s->tm.load_us, s->tm.init_us,
        ttft, tpot, n, predict);
  return 0;
}
