// Memory allocator for user programs: malloc, calloc and free over sbrk.
//
// Free blocks sit on one circular list sorted by address, each starting
// with a header that holds its size in 16-byte units (K&R's design), so
// free can merge a block with its neighbours. malloc takes the first block
// that fits, splitting off the tail, and asks sbrk for more when none does.
//
// Big blocks are the common case here: an LLM runtime allocates weights
// and caches of hundreds of megabytes. Such a request goes straight to
// sbrk for exactly its size, and freeing a big block that ends at the
// program break gives the memory back with a negative sbrk. Memory fresh
// from sbrk is already zero (the kernel zeroes every page it hands out),
// so calloc clears only memory that was used before: no per-byte work for
// a big fresh block. One mutex makes malloc and free safe from several
// threads; a process with threads keeps its memory (the kernel refuses to
// shrink it), so the block then stays on the free list.

#include "user/lib/user.h"

struct header {
  struct header *next; // next free block, by address (free blocks only)
  uint64 units;        // size of the block in units, header included
};

#define UNIT     sizeof(struct header) // 16 bytes: keeps doubles aligned
#define MINGROW  (64 * 1024 / UNIT)    // grow the heap by at least 64 KiB
#define BIGBLOCK (1024 * 1024 / UNIT)  // blocks this big return to the kernel

static struct header base;   // zero-size anchor of the free list
static struct header *freep; // where the last search stopped
static struct mutex lock;    // guards the list and the break

// Make the free list an empty circle around base, the first time.
static void
startlist(void)
{
  if (freep == 0) {
    base.next = freep = &base;
    base.units = 0;
  }
}

// Put block b on the free list, merging it with free neighbours. The
// list is sorted by address: it runs from base, which lies in the
// program's data below the heap, up through the heap and back to base.
static void
insert(struct header *b)
{
  struct header *p, *next;

  // Start where the last operation was when that lies below b.
  p = (freep != 0 && freep < b) ? freep : &base;
  while (p->next != &base && p->next < b)
    p = p->next;
  next = p->next;
  if (next != &base && b + b->units == next) {
    b->units += next->units;
    next = next->next;
  }
  b->next = next;
  if (p != &base && p + p->units == b) {
    p->units += b->units;
    p->next = b->next;
  } else {
    p->next = b;
  }
  freep = p;
}

// If the highest free block (the one before base again) is big and ends
// at the program break, hand it back to the kernel.
static void
trim(void)
{
  struct header *prev, *last;

  for (prev = &base; prev->next->next != &base; prev = prev->next)
    ;
  last = prev->next;
  if (last == &base || last->units < BIGBLOCK || (char *)(last + last->units) != sbrk(0))
    return;
  if (sbrk(-(long)(last->units * UNIT)) == (char *)-1)
    return;
  prev->next = &base;
  freep = prev;
}

// Get a block of units from the kernel, or 0 when it has no memory.
static struct header *
morecore(uint64 units)
{
  struct header *b;
  uint64 brk = (uint64)sbrk(0);

  // The break starts wherever the program's data ends; headers need
  // 16-byte alignment, so skip to the next multiple once.
  if (brk % UNIT != 0 && sbrk(UNIT - brk % UNIT) == (char *)-1)
    return 0;
  b = (struct header *)sbrk(units * UNIT);
  if (b == (struct header *)-1)
    return 0;
  b->units = units;
  return b;
}

// Add at least units to the free list; returns the block before the new
// memory, or 0 when the kernel has no memory.
static struct header *
grow(uint64 units)
{
  struct header *b;

  b = morecore(units < MINGROW ? MINGROW : units);
  if (b == 0)
    return 0;
  insert(b);
  return freep;
}

// Take units from free block b, whose list predecessor is prev.
static void *
take(struct header *prev, struct header *b, uint64 units)
{
  if (b->units == units) {
    prev->next = b->next;
  } else {
    // Hand out the tail, so the free part keeps its place in the list.
    b->units -= units;
    b += b->units;
    b->units = units;
  }
  freep = prev;
  return b + 1;
}

// Allocate n bytes; *fresh is set when they come untouched from sbrk.
static void *
alloc(uint64 n, int *fresh)
{
  struct header *prev, *b;
  uint64 units;

  if (n == 0 || n > (1UL << 40))
    return 0;
  units = (n + UNIT - 1) / UNIT + 1;
  startlist();
  *fresh = 0;
  if (units >= BIGBLOCK) {
    // Big: the first free block that fits, else exactly this much fresh
    // memory from sbrk, so a later free can give it all back.
    for (prev = &base, b = base.next; b != &base; prev = b, b = b->next)
      if (b->units >= units)
        return take(prev, b, units);
    if ((b = morecore(units)) == 0)
      return 0;
    *fresh = 1;
    return b + 1;
  }
  for (prev = freep, b = prev->next;; prev = b, b = b->next) {
    if (b->units >= units)
      return take(prev, b, units);
    if (b == freep && (b = grow(units)) == 0)
      return 0;
  }
}

void *
malloc(uint64 n)
{
  int fresh;

  mutex_lock(&lock);
  void *p = alloc(n, &fresh);
  mutex_unlock(&lock);
  return p;
}

// memset takes a 32-bit length: clear n bytes in pieces.
static void
zero(char *p, uint64 n)
{
  uint64 chunk;

  for (; n > 0; n -= chunk, p += chunk) {
    chunk = n < (1UL << 30) ? n : (1UL << 30);
    memset(p, 0, chunk);
  }
}

// Returns zeroed memory for count elements of size bytes, or 0 if the
// product overflows or there is no memory.
void *
calloc(uint64 count, uint64 size)
{
  void *p;
  int fresh;

  if (size != 0 && count > (1UL << 40) / size)
    return 0;
  mutex_lock(&lock);
  p = alloc(count * size, &fresh);
  mutex_unlock(&lock);
  if (p != 0 && !fresh)
    zero(p, count * size);
  return p;
}

void
free(void *ap)
{
  struct header *b;

  if (ap == 0)
    return;
  b = (struct header *)ap - 1;
  mutex_lock(&lock);
  startlist();
  insert(b);
  if (b->units >= BIGBLOCK || freep->units >= BIGBLOCK)
    trim();
  mutex_unlock(&lock);
}
