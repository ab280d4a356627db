// A minimal reader of the flattened device tree (FDT) that QEMU passes
// in a1 at boot. The kernel needs three facts from it: where RAM is and
// how big (the `reg` property of the /memory node), how many harts the
// machine has (the /cpus/cpu@N nodes), and the boot command line
// (/chosen's `bootargs`, QEMU's -append text; bootargs.c reads it).
//
// The blob (devicetree specification, "Flattened Devicetree Format") is a
// big-endian header, a structure block of 4-byte-aligned tokens (begin
// node + name, property + length + name offset + value, end node, end),
// and a strings block holding the property names.
#include "kernel/include/types.h"
#include "kernel/include/defs.h"

#define FDT_MAGIC      0xd00dfeed
#define FDT_BEGIN_NODE 1
#define FDT_END_NODE   2
#define FDT_PROP       3
#define FDT_NOP        4
#define FDT_END        9

struct fdt_header {
  uint32 magic;
  uint32 totalsize;
  uint32 off_dt_struct;
  uint32 off_dt_strings;
  uint32 off_mem_rsvmap;
  uint32 version;
  uint32 last_comp_version;
  uint32 boot_cpuid_phys;
  uint32 size_dt_strings;
  uint32 size_dt_struct;
};

struct fdt_scan {
  int depth;      // 1 inside the root node
  int addr_cells; // the root's #address-cells
  int size_cells; // the root's #size-cells
  int in_memory;  // inside a /memory node
  int in_cpus;    // inside /cpus
  int in_chosen;  // inside /chosen
  uint64 ram_base;
  uint64 ram_size;
  int nharts;
  const char *bootargs; // /chosen's bootargs value, 0 if none
  uint32 bootargs_len;  // its length in the blob, NUL included
};

// The 32-bit big-endian number at p.
static uint32
be32(const void *p)
{
  const uchar *b = p;
  return ((uint32)b[0] << 24) | ((uint32)b[1] << 16) | ((uint32)b[2] << 8) | b[3];
}

// Reads a number made of `cells` 32-bit big-endian cells.
static uint64
cells(const uchar *p, int cells)
{
  uint64 v = 0;
  for (int i = 0; i < cells; i++)
    v = (v << 32) | be32(p + 4 * i);
  return v;
}

// Does s begin with pre?
static int
prefix(const char *s, const char *pre)
{
  return strncmp(s, pre, strlen(pre)) == 0;
}

// Enters node name: notes the memory, cpus and chosen nodes, and counts
// the cpu@ nodes under cpus.
static void
begin_node(struct fdt_scan *s, const char *name)
{
  s->depth++;
  if (s->depth == 2 && prefix(name, "memory"))
    s->in_memory = 1;
  if (s->depth == 2 && strncmp(name, "cpus", 5) == 0)
    s->in_cpus = 1;
  if (s->depth == 2 && strncmp(name, "chosen", 7) == 0)
    s->in_chosen = 1;
  if (s->depth == 3 && s->in_cpus && prefix(name, "cpu@"))
    s->nharts++;
}

// Leaves the current node.
static void
end_node(struct fdt_scan *s)
{
  if (s->depth == 2)
    s->in_memory = s->in_cpus = s->in_chosen = 0;
  s->depth--;
}

// Property name (len bytes of value val) of the current node: the root's
// cell sizes, the first memory node's reg (base and size), chosen's
// bootargs.
static void
property(struct fdt_scan *s, const char *name, const uchar *val, uint32 len)
{
  if (s->depth == 1 && strncmp(name, "#address-cells", 15) == 0 && len == 4)
    s->addr_cells = be32(val);
  else if (s->depth == 1 && strncmp(name, "#size-cells", 12) == 0 && len == 4)
    s->size_cells = be32(val);
  else if (s->depth == 2 && s->in_memory && s->ram_size == 0 && strncmp(name, "reg", 4) == 0 &&
      len >= 4 * (s->addr_cells + s->size_cells)) {
    s->ram_base = cells(val, s->addr_cells);
    s->ram_size = cells(val + 4 * s->addr_cells, s->size_cells);
  } else if (s->depth == 2 && s->in_chosen && strncmp(name, "bootargs", 9) == 0) {
    s->bootargs = (const char *)val;
    s->bootargs_len = len;
  }
}

// Walks the device tree at physical address pa (the kernel runs with
// paging off or 1:1) into s. Returns 0, or -1 if the blob is not a device
// tree.
static int
fdt_walk(uint64 pa, struct fdt_scan *s)
{
  const struct fdt_header *h = (const struct fdt_header *)pa;

  if (pa == 0 || be32(&h->magic) != FDT_MAGIC)
    return -1;
  const uchar *p = (const uchar *)pa + be32(&h->off_dt_struct);
  const uchar *end = p + be32(&h->size_dt_struct);
  const char *strings = (const char *)pa + be32(&h->off_dt_strings);
  while (p < end) {
    uint32 tok = be32(p);
    p += 4;
    if (tok == FDT_BEGIN_NODE) {
      begin_node(s, (const char *)p);
      p += (strlen((const char *)p) + 1 + 3) & ~3;
    } else if (tok == FDT_END_NODE) {
      end_node(s);
    } else if (tok == FDT_PROP) {
      uint32 len = be32(p);
      property(s, strings + be32(p + 4), p + 8, len);
      p += 8 + ((len + 3) & ~3);
    } else if (tok == FDT_END) {
      break;
    } else if (tok != FDT_NOP) {
      return -1;
    }
  }
  return 0;
}

// Fills in RAM base/size and the number of harts from the device tree at
// pa. Returns 0, or -1 if the blob is not a device tree or has no RAM.
int
fdt_parse(uint64 pa, uint64 *ram_base, uint64 *ram_size, int *nharts)
{
  struct fdt_scan s = { .addr_cells = 2, .size_cells = 1 };

  if (fdt_walk(pa, &s) < 0 || s.ram_size == 0)
    return -1;
  *ram_base = s.ram_base;
  *ram_size = s.ram_size;
  *nharts = s.nharts;
  return 0;
}

// Copies /chosen's bootargs from the device tree at pa into buf (at most
// n - 1 bytes and a NUL). Returns the length copied; 0 when there are none.
int
fdt_bootargs(uint64 pa, char *buf, int n)
{
  struct fdt_scan s = { .addr_cells = 2, .size_cells = 1 };
  int len = 0;

  if (fdt_walk(pa, &s) == 0 && s.bootargs != 0)
    while (len < n - 1 && len < (int)s.bootargs_len && s.bootargs[len] != 0) {
      buf[len] = s.bootargs[len];
      len++;
    }
  buf[len] = 0;
  return len;
}

// The size in bytes of the device tree at pa (already checked by fdt_parse).
uint64
fdt_size(uint64 pa)
{
  return be32(&((const struct fdt_header *)pa)->totalsize);
}
