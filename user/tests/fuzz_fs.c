// fuzz's file-system calls (fuzz.c): descriptors (open, read, write,
// close, dup, fstat, whole files) and names (unlink, link, mkdir, mknod,
// chdir, exec), every path inside the worker's scratch directory.

#include "user/tests/fuzz.h"

// A file written whole (several blocks, read back by whole_read) through
// a descriptor opened for this call.
static void
whole_write(struct call *c)
{
  c->nr = SYS_write;
  c->tmpfd = open(scratchname(), O_CREATE | O_TRUNC | O_WRONLY);
  c->a[0] = c->tmpfd;
  c->a[2] = 4096 + pick(SCRATCH / 2 - 4096);
  c->a[1] = okptr(c->a[2]);
  c->datacount = 1;
}

// A read from offset 0 of a fresh descriptor: whole blocks go straight
// from the disk to the buffer, of any kind.
static void
whole_read(struct call *c)
{
  c->nr = SYS_read;
  c->tmpfd = open(chance(50) ? scratchname() : bigfile(), O_RDONLY);
  c->scrub = 1;
  c->a[0] = c->tmpfd;
  long n = chance(50) ? 4096 * (1 + pick(16)) : anylen();
  dataptr(c, 1, n, 1);
  c->a[2] = n;
  c->datacount = 1;
}

// read or write (nr) of any length on any descriptor, with any pointer.
static void
read_write(struct call *c, long nr)
{
  c->nr = nr;
  c->a[0] = anyfd();
  long n = anylen();
  dataptr(c, 1, n, nr == SYS_read);
  c->a[2] = n;
  c->datacount = 1;
}

// A call on descriptors: open (any mode), read, write, close, dup, fstat,
// whole files.
void
call_file(struct call *c)
{
  static const int modes[] = { O_RDONLY, O_WRONLY, O_RDWR, O_CREATE | O_RDWR,
    O_CREATE | O_TRUNC | O_WRONLY, O_TRUNC | O_RDWR, 0x7fffffff, -1 };

  switch (pick(11)) {
  case 9: whole_write(c); break;
  case 10: whole_read(c); break;
  case 0: // open
    c->nr = SYS_open;
    c->a[1] = modes[pick(NELEM(modes))];
    c->a[0] = pathptr(c->a[1] == O_RDONLY ? lookname() : scratchname());
    break;
  case 1:
  case 2: read_write(c, SYS_read); break;
  case 3:
  case 4: read_write(c, SYS_write); break;
  case 5:
    c->nr = SYS_close;
    c->a[0] = anyfd();
    break;
  case 6:
    c->nr = SYS_dup;
    c->a[0] = anyfd();
    break;
  case 7:
    c->nr = SYS_fstat;
    c->a[0] = anyfd();
    dataptr(c, 1, sizeof(struct stat), 1);
    break;
  default: // a read of what is there, into a valid buffer
    c->nr = SYS_read;
    c->a[0] = anyfd();
    c->a[1] = okptr(512);
    c->a[2] = pick(512);
    break;
  }
}

// A call on names in the scratch directory: unlink, link, mkdir, mknod
// (never the console), chdir (never up), exec (never an ELF).
void
call_names(struct call *c)
{
  static const short majors[] = { 0, 2, 9, 10, -1, 32767 }; // never the console (1)

  switch (pick(6)) {
  case 0:
    c->nr = SYS_unlink;
    c->a[0] = pathptr(scratchname());
    break;
  case 1:
    c->nr = SYS_link;
    c->a[0] = pathptr(scratchname());
    c->a[1] = pathptr(scratchname());
    break;
  case 2:
    c->nr = SYS_mkdir;
    c->a[0] = pathptr(scratchname());
    break;
  case 3:
    c->nr = SYS_mknod;
    c->a[0] = pathptr(scratchname());
    c->a[1] = majors[pick(NELEM(majors))];
    c->a[2] = pick(3);
    break;
  case 4: // scratch names never climb: the cwd stays inside the scratch directory
    c->nr = SYS_chdir;
    c->a[0] = pathptr(scratchname());
    break;
  default: { // exec: scratch files hold no ELF; argv of every kind
    int kind;
    c->nr = SYS_exec;
    c->a[0] = pathptr(scratchname());
    c->a[1] = chance(50) ? anyptr(&kind) : okptr(64);
    break;
  }
  }
}
