// fuzz's file mappings: mmap of good and bad descriptors, lengths,
// protections, flags and offsets; munmap of the latest mapping or of
// anything; writes whose source is a mapping, so the kernel fills its
// pages inside the call (docs/VM.md).

#include "user/tests/fuzz.h"

static uint64 lastmap, lastlen; // the latest mapping made (munmap and writes use it)

// mmap of a fresh descriptor or any one, with lengths, protections, flags
// and offsets good and bad; munmap of that mapping or of anything; a write
// from the mapping, whose pages the kernel fills inside the call (or
// refuses past the file's end).
void
call_mmap(struct call *c)
{
  static const long prots[] = { PROT_READ, PROT_READ | PROT_WRITE, 0, PROT_WRITE, 4, -1 };
  static const long flags[] = { MAP_SHARED, MAP_PRIVATE, 0, 3, -1 };
  int kind;

  switch (pick(4)) {
  case 0:
  case 1:
    c->nr = SYS_mmap;
    c->tmpfd = chance(70) ? open(chance(50) ? scratchname() : bigfile(), O_RDONLY) : -1;
    c->a[0] = chance(90) ? 0 : rnd();
    c->a[1] = chance(70) ? 4096 * (1 + pick(64)) : anylen();
    c->a[2] = prots[pick(NELEM(prots))];
    c->a[3] = flags[pick(NELEM(flags))];
    c->a[4] = c->tmpfd >= 0 ? c->tmpfd : anyfd();
    c->a[5] = chance(70) ? 4096 * pick(8) : rnd();
    break;
  case 2:
    c->nr = SYS_munmap;
    c->a[0] = lastmap && chance(70) ? lastmap + 4096 * pick(4) : anyptr(&kind);
    c->a[1] = chance(70) ? 4096 * pick(8) : anylen();
    break;
  default:
    c->nr = SYS_write;
    c->tmpfd = open(scratchname(), O_CREATE | O_TRUNC | O_WRONLY);
    c->a[0] = c->tmpfd;
    c->a[1] = lastmap ? lastmap : okptr(16);
    c->a[2] = lastmap ? pick(lastlen < SCRATCH ? lastlen + 1 : SCRATCH) : pick(16);
    break;
  }
}

void
mmap_made(struct call *c, long r)
{
  if (c->nr == SYS_mmap && r > 0) {
    lastmap = r;
    lastlen = c->a[1];
  }
}
