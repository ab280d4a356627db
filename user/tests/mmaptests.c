// mmaptests: the file mappings' rules (kernel/core/mmap.c,
// kernel/fs/pagecache.c, docs/VM.md) as self-test cases.
//
//   mmaptests          run every case
//   mmaptests -q       only the quick ones
//   mmaptests NAME...  only the named cases
//
// The runner is usertests' (harness.c). Every file a case maps holds a
// pattern computed from the offset (pattern()), so what a mapping shows
// is checked against an independent formula, not against another read
// of the file. Around the cases, three leak checks: the free memory
// pages, the open-file slots, and the page cache's pages in use by
// mappings, which must be back at their idle values once every case's
// processes have exited.

#include "user/lib/user.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/stat.h"
#include "kernel/include/param.h"
#include "kernel/include/mman.h"
#include "kernel/include/riscv.h"
#include "kernel/include/sysinfo.h"
#include "user/tests/harness.h"

#define MB (1024L * 1024)

// The byte at offset off of a test file.
static uint8
pattern(uint64 off)
{
  return (uint8)(off * 7 + off / PGSIZE * 13 + 1);
}

// Creates name with size bytes of pattern (ending the case on failure).
static void
make_file(const char *name, uint64 size)
{
  static uint8 buf[16 * PGSIZE];
  int fd = open(name, O_CREATE | O_TRUNC | O_WRONLY);

  expect(fd >= 0, "open %s: %s", name, strerror(fd));
  for (uint64 off = 0; off < size; off += sizeof(buf)) {
    uint64 n = size - off < sizeof(buf) ? size - off : sizeof(buf);
    for (uint64 i = 0; i < n; i++)
      buf[i] = pattern(off + i);
    int r = write(fd, buf, n);
    expect(r == n, "write %s at %lu: %d (%s)", name, off, r, r < 0 ? strerror(r) : "short");
  }
  close(fd);
}

// Maps len bytes of name from off (ending the case on failure).
static uint8 *
map_file(const char *name, uint64 len, int prot, int flags, uint64 off)
{
  int fd = open(name, O_RDONLY);

  expect(fd >= 0, "open %s: %s", name, strerror(fd));
  uint8 *p = mmap(0, len, prot, flags, fd, off);
  close(fd); // the mapping keeps the file
  expect((long)p > 0, "mmap %s: %ld (%s)", name, (long)p, strerror((long)p));
  return p;
}

// Requires that p shows [off, off + n) of a pattern file of size bytes:
// the pattern up to size, zeros after it.
static void
check_range(const uint8 *p, uint64 off, uint64 n, uint64 size, int line)
{
  for (uint64 i = 0; i < n; i++) {
    uint8 want = off + i < size ? pattern(off + i) : 0;
    if (p[i] != want) {
      char why[120];
      snprintf(why, sizeof(why), "byte at file offset %lu is %d, expected %d", off + i, p[i], want);
      failed(line, why);
    }
  }
}
#define CHECK_RANGE(p, off, n, size) check_range((p), (off), (n), (size), __LINE__)

static struct sysinfo
info(void)
{
  struct sysinfo si;

  expect(sysinfo(&si) == 0, "sysinfo failed");
  return si;
}

// Forks a child that runs fn(arg) and exits 0; returns its pid.
static int
spawn(void (*fn)(uint8 *), uint8 *arg)
{
  int pid = fork();

  expect(pid >= 0, "fork: %s", strerror(pid));
  if (pid == 0) {
    fn(arg);
    exit(0);
  }
  return pid;
}

// Waits for pid, which the kernel must have killed.
static void
wait_killed(int pid, int line)
{
  int st = 0, r = wait(&st);

  if (r != pid || st == 0) {
    char why[100];
    snprintf(
        why, sizeof(why), "child %d: wait returned %d, status %d; expected it killed", pid, r, st);
    failed(line, why);
  }
}
#define WAIT_KILLED(pid) wait_killed((pid), __LINE__)

// ---------------------------------------------------------------- sharing

#define SHSIZE (5 * PGSIZE + 100)

static void
child_maps_shared(uint8 *unused)
{
  uint8 *q = map_file("mm_sh", SHSIZE, PROT_READ, MAP_SHARED, 0);
  CHECK_RANGE(q, 0, 6 * PGSIZE, SHSIZE);
  struct sysinfo si = info();
  // Its own 6 pages and the 6 it inherited: all of them the page cache's,
  // mapped twice (the same physical pages).
  expect(si.resident == 12 && si.shared == 12,
      "child: %lu resident, %lu shared, expected 12 and 12", si.resident, si.shared);
}

// Two processes that map one file see the same pages: the page cache's.
static void
t_shared(void)
{
  make_file("mm_sh", SHSIZE);
  uint8 *p = map_file("mm_sh", SHSIZE, PROT_READ, MAP_SHARED, 0);
  struct sysinfo si = info();
  expect(si.resident == 0, "%lu pages resident before any access", si.resident);
  struct sysinfo start = si;
  CHECK_RANGE(p, 0, 6 * PGSIZE, SHSIZE); // the last page's tail is zero
  si = info();
  // One fault: the cache read the file's 6 pages in one cluster, and the
  // fault mapped them all.
  expect(si.resident == 6 && si.shared == 0 && si.faults == 1,
      "%lu resident, %lu shared, %lu faults; expected 6, 0, 1", si.resident, si.shared, si.faults);
  expect(si.misses == start.misses + 1 && si.readahead == start.readahead + 5,
      "%lu misses and %lu pages read ahead, expected 1 and 5", si.misses - start.misses,
      si.readahead - start.readahead);
  WAITSTATUS(spawn(child_maps_shared, 0), 0);
  // A system call reads a mapping too, and fills pages it finds empty.
  uint8 *r = map_file("mm_sh", SHSIZE, PROT_READ, MAP_SHARED, 0);
  int fd = open("mm_sh2", O_CREATE | O_TRUNC | O_WRONLY);
  expect(fd >= 0 && write(fd, r, SHSIZE) == SHSIZE, "write from a fresh mapping failed");
  close(fd);
  uint8 *q = map_file("mm_sh2", SHSIZE, PROT_READ, MAP_SHARED, 0);
  CHECK_RANGE(q, 0, SHSIZE, SHSIZE);
  unlink("mm_sh");
  unlink("mm_sh2");
}

static void
child_checks_original(uint8 *p)
{
  CHECK_RANGE(p, 0, 3 * PGSIZE, 3 * PGSIZE);
  uint8 *q = map_file("mm_pv", 3 * PGSIZE, PROT_READ, MAP_SHARED, 0);
  CHECK_RANGE(q, 0, 3 * PGSIZE, 3 * PGSIZE);
}

// A private mapping's writes go to the process's own copy: neither
// another mapping nor the file sees them.
static void
t_private(void)
{
  make_file("mm_pv", 3 * PGSIZE);
  uint8 *p = map_file("mm_pv", 3 * PGSIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE, 0);
  uint8 *shared = map_file("mm_pv", 3 * PGSIZE, PROT_READ, MAP_SHARED, 0);
  CHECK_RANGE(p, 0, 3 * PGSIZE, 3 * PGSIZE);
  CHECK_RANGE(shared, 0, 3 * PGSIZE, 3 * PGSIZE);
  expect(info().shared == 6, "after reading both mappings, %lu shared pages, expected 6",
      info().shared);
  int child = fork();
  expect(child >= 0, "fork: %s", strerror(child));
  if (child == 0) {
    sleep(2); // the parent writes meanwhile
    child_checks_original(p);
    exit(0);
  }
  memset(p + PGSIZE, 0xEE, PGSIZE);
  p[10] = 0x55;
  WAITSTATUS(child, 0);
  uint8 *fresh = map_file("mm_pv", 3 * PGSIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE, 0);
  fresh[2 * PGSIZE] = 0x44; // a page's first access is a write
  CHECK_RANGE(fresh + 2 * PGSIZE + 1, 2 * PGSIZE + 1, PGSIZE - 1, 3 * PGSIZE);
  CHECK_RANGE(shared, 0, 3 * PGSIZE, 3 * PGSIZE);
  expect(p[10] == 0x55 && p[PGSIZE + 17] == 0xEE, "the private writes were lost");
  CHECK_RANGE(p + 2 * PGSIZE, 2 * PGSIZE, PGSIZE, 3 * PGSIZE);
  uint8 buf[PGSIZE];
  int fd = open("mm_pv", O_RDONLY);
  expect(fd >= 0 && read(fd, buf, PGSIZE) == PGSIZE, "read mm_pv");
  close(fd);
  CHECK_RANGE(buf, 0, PGSIZE, 3 * PGSIZE);
  unlink("mm_pv");
}

// ---------------------------------------------------------------- processes

static void
child_after_fork(uint8 *p)
{
  // Inherited: the parent's private write and the untouched file pages.
  expect(p[0] == 0x77, "the child sees %d, not the parent's private write", p[0]);
  CHECK_RANGE(p + 1, 1, 4 * PGSIZE - 1, 4 * PGSIZE);
  p[1] = 0x66; // the child's own copy now
}

// fork copies the mappings: private pages copied, cache pages shared.
static void
t_fork(void)
{
  make_file("mm_fk", 4 * PGSIZE);
  uint8 *p = map_file("mm_fk", 4 * PGSIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE, 0);
  p[0] = 0x77;
  CHECK_RANGE(p + PGSIZE, PGSIZE, PGSIZE, 4 * PGSIZE);
  WAITSTATUS(spawn(child_after_fork, p), 0);
  expect(p[1] == pattern(1), "the child's write reached the parent: %d", p[1]);
  unlink("mm_fk");
}

static void
child_execs(uint8 *unused)
{
  uint8 *p = map_file("mm_ex", 8 * PGSIZE, PROT_READ, MAP_SHARED, 0);
  CHECK_RANGE(p, 0, 8 * PGSIZE, 8 * PGSIZE);
  char *argv[] = { "mmaptests", "--exec-probe", 0 };
  exec("/mmaptests", argv);
  fail("exec failed");
}

static long
pages_in_use(void)
{
  struct sysinfo si = info();
  return (long)(si.cachepages - si.cacheidle);
}

// exec and exit drop the mappings: the new image has none, and the
// cache pages the old one used are idle again.
static void
t_exec_exit(void)
{
  make_file("mm_ex", 8 * PGSIZE);
  long before = pages_in_use();
  WAITSTATUS(spawn(child_execs, 0), 0); // --exec-probe checks the new image
  expect(pages_in_use() == before, "%ld cache pages in use after exec and exit, %ld before",
      pages_in_use(), before);
  int pid = fork();
  if (pid == 0) {
    uint8 *p = map_file("mm_ex", 8 * PGSIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE, 0);
    CHECK_RANGE(p, 0, 8 * PGSIZE, 8 * PGSIZE);
    p[5] = 1;
    exit(0); // with its mapping
  }
  WAITSTATUS(pid, 0);
  expect(pages_in_use() == before, "%ld cache pages in use after exit, %ld before", pages_in_use(),
      before);
  unlink("mm_ex");
}

// ---------------------------------------------------------------- munmap

static void
child_touches(uint8 *p)
{
  volatile uint8 x = *p;
  (void)x;
}

// munmap of the head, the tail and the middle of a mapping: the rest
// stays, the removed pages fault.
static void
t_partial(void)
{
  make_file("mm_pt", 8 * PGSIZE);
  uint8 *p = map_file("mm_pt", 8 * PGSIZE, PROT_READ, MAP_SHARED, 0);
  CHECK_RANGE(p, 0, 8 * PGSIZE, 8 * PGSIZE);
  expect(munmap(p + 1, PGSIZE) == -EINVAL, "munmap of a misaligned address");
  expect(munmap(p, 0) == -EINVAL, "munmap of 0 bytes");
  expect(munmap(p + 3 * PGSIZE, 2 * PGSIZE) == 0, "munmap of the middle");
  expect(munmap(p, PGSIZE) == 0, "munmap of the head");
  expect(munmap(p + 7 * PGSIZE, 100) == 0, "munmap of the tail (rounded up to a page)");
  expect(info().resident == 4, "%lu pages resident, expected 4", info().resident);
  CHECK_RANGE(p + PGSIZE, PGSIZE, 2 * PGSIZE, 8 * PGSIZE);
  CHECK_RANGE(p + 5 * PGSIZE, 5 * PGSIZE, 2 * PGSIZE, 8 * PGSIZE);
  uint8 *gone[] = { p, p + 3 * PGSIZE, p + 4 * PGSIZE, p + 7 * PGSIZE };
  for (int i = 0; i < 4; i++)
    WAIT_KILLED(spawn(child_touches, gone[i]));
  expect(munmap(p, 8 * PGSIZE) == 0, "munmap of the whole range");
  expect(info().resident == 0, "%lu pages resident after munmap", info().resident);
  WAIT_KILLED(spawn(child_touches, p + 2 * PGSIZE));
  unlink("mm_pt");
}

// A mapped file that is unlinked stays readable through the mapping;
// when the mapping goes, its pages leave the cache, and the inode's next
// file does not see them.
static void
t_unlink(void)
{
  make_file("mm_ul", 4 * PGSIZE);
  uint8 *p = map_file("mm_ul", 4 * PGSIZE, PROT_READ, MAP_SHARED, 0);
  CHECK_RANGE(p, 0, PGSIZE, 4 * PGSIZE);
  expect(unlink("mm_ul") == 0, "unlink");
  CHECK_RANGE(p, 0, 4 * PGSIZE, 4 * PGSIZE); // pages 1-3 read after the unlink
  uint64 cached = info().cachepages;
  expect(munmap(p, 4 * PGSIZE) == 0, "munmap");
  // The last reference went: the blocks are freed, and the pages with them.
  expect(info().cachepages == cached - 4, "%lu pages cached after the file was freed, %lu before",
      info().cachepages, cached);
  int fd = open("mm_ul", O_CREATE | O_WRONLY);
  uint8 zeros[PGSIZE];
  memset(zeros, 0, sizeof(zeros));
  expect(fd >= 0 && write(fd, zeros, PGSIZE) == PGSIZE, "rewrite mm_ul");
  close(fd);
  uint8 *q = map_file("mm_ul", PGSIZE, PROT_READ, MAP_SHARED, 0);
  for (int i = 0; i < PGSIZE; i++)
    expect(q[i] == 0, "the new file shows the old file's byte %d at %d", q[i], i);
  unlink("mm_ul");
}

// ---------------------------------------------------------------- refusals

// A fault past the end of the file kills the process; inside a system
// call the same access is -EFAULT.
static void
t_pastend(void)
{
  make_file("mm_pe", PGSIZE + 10);
  uint8 *p = map_file("mm_pe", 4 * PGSIZE, PROT_READ, MAP_SHARED, 0);
  CHECK_RANGE(p, 0, 2 * PGSIZE, PGSIZE + 10); // zeros after the end, in its page
  WAIT_KILLED(spawn(child_touches, p + 2 * PGSIZE));
  WAIT_KILLED(spawn(child_touches, p + 4 * PGSIZE - 1));
  int fd = open("mm_pe2", O_CREATE | O_TRUNC | O_WRONLY);
  int r = write(fd, p + 2 * PGSIZE, 1);
  expect(r == -EFAULT, "write from past the end returned %d, expected -EFAULT", r);
  close(fd);
  expect(mmap(0, PGSIZE, PROT_READ, MAP_SHARED, 99, 0) == (void *)-EBADF, "mmap of fd 99");
  unlink("mm_pe");
  unlink("mm_pe2");
}

static void
child_writes(uint8 *p)
{
  p[3] = 1;
}

// Writes to a mapping without PROT_WRITE kill the process (or give
// -EFAULT in a system call); mmap refuses what it cannot map.
static void
t_readonly(void)
{
  make_file("mm_ro", 2 * PGSIZE);
  uint8 *p = map_file("mm_ro", 2 * PGSIZE, PROT_READ, MAP_SHARED, 0);
  uint8 *q = map_file("mm_ro", 2 * PGSIZE, PROT_READ, MAP_PRIVATE, 0);
  WAIT_KILLED(spawn(child_writes, p));
  WAIT_KILLED(spawn(child_writes, q));
  CHECK_RANGE(p, 0, PGSIZE, 2 * PGSIZE);
  WAIT_KILLED(spawn(child_writes, p)); // a present page too
  int fd = open("mm_ro", O_RDONLY);
  expect(read(fd, p + PGSIZE, 10) == -EFAULT, "read into a read-only mapping succeeded");
  expect(mmap(0, PGSIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == (void *)-EINVAL,
      "a shared writable mapping");
  expect(mmap(0, PGSIZE, PROT_READ, MAP_SHARED, fd, 100) == (void *)-EINVAL, "a misaligned offset");
  expect(mmap(0, 0, PROT_READ, MAP_SHARED, fd, 0) == (void *)-EINVAL, "0 bytes");
  expect(mmap(0, PGSIZE, PROT_READ, 3, fd, 0) == (void *)-EINVAL, "flags 3");
  expect(mmap(0, PGSIZE, 0, MAP_SHARED, fd, 0) == (void *)-EINVAL, "no PROT_READ");
  close(fd);
  fd = open("mm_ro", O_WRONLY);
  expect(mmap(0, PGSIZE, PROT_READ, MAP_SHARED, fd, 0) == (void *)-EBADF, "a write-only file");
  close(fd);
  fd = open("/", O_RDONLY);
  expect(mmap(0, PGSIZE, PROT_READ, MAP_SHARED, fd, 0) == (void *)-EINVAL, "a directory");
  close(fd);
  fd = open("/console", O_RDONLY);
  expect(mmap(0, PGSIZE, PROT_READ, MAP_SHARED, fd, 0) == (void *)-EINVAL, "a device");
  close(fd);
  unlink("mm_ro");
}

// At most NMAP mappings.
static void
t_limits(void)
{
  make_file("mm_lm", PGSIZE);
  int fd = open("mm_lm", O_RDONLY);
  uint8 *low = 0;
  for (int i = 0; i < NMAP; i++) {
    low = mmap(0, PGSIZE, PROT_READ, MAP_SHARED, fd, 0);
    expect((long)low > 0, "mapping %d: %ld", i, (long)low);
  }
  expect(mmap(0, PGSIZE, PROT_READ, MAP_SHARED, fd, 0) == (void *)-ENOMEM, "mapping NMAP + 1");
  close(fd);
  CHECK_RANGE(low, 0, PGSIZE, PGSIZE);
  unlink("mm_lm");
}

// ---------------------------------------------------------------- eviction

#define EVSIZE (16 * MB)

// Takes all free memory but about `leave` bytes and reports when it has;
// holds it until the parent closes the pipe.
static void
hog(int ready, int done, long leave)
{
  long chunk;

  for (chunk = 64 * MB; chunk >= PGSIZE; chunk /= 2)
    while (sbrk(chunk) != (char *)-1)
      ;
  sbrk(-leave);
  write(ready, "x", 1);
  char c;
  read(done, &c, 1);
  exit(0);
}

// A file larger than the free memory, read whole through a mapping: the
// process's own pages are given back to the cache and reclaimed as it goes.
static void
t_evict(void)
{
  int r[2], d[2];
  char c;

  make_file("mm_ev", EVSIZE);
  uint8 *p = map_file("mm_ev", EVSIZE, PROT_READ, MAP_SHARED, 0);
  expect(pipe(r) == 0 && pipe(d) == 0, "pipe");
  int pid = fork();
  if (pid == 0) {
    close(d[1]);
    hog(r[1], d[0], 2 * MB);
  }
  close(d[0]);
  expect(read(r[0], &c, 1) == 1, "the hog did not start");
  struct sysinfo before = info();
  expect(before.freepages * PGSIZE < EVSIZE / 2, "%lu pages free: the hog left too many",
      before.freepages);
  for (uint64 off = 0; off < EVSIZE; off += PGSIZE)
    CHECK_RANGE(p + off, off, PGSIZE, EVSIZE);
  struct sysinfo after = info();
  close(d[1]);
  WAITSTATUS(pid, 0);
  expect(after.evictions > before.evictions, "no page was evicted");
  expect(after.resident < EVSIZE / PGSIZE, "all %lu pages stayed resident", after.resident);
  unlink("mm_ev");
}

// ---------------------------------------------------------------- main

static struct test tests[] = {
  { t_shared, "shared" },
  { t_private, "private" },
  { t_fork, "fork" },
  { t_exec_exit, "exec_exit" },
  { t_partial, "partial" },
  { t_unlink, "unlink" },
  { t_pastend, "pastend" },
  { t_readonly, "readonly" },
  { t_limits, "limits" },
  { t_evict, "evict", 1 },
  { 0, 0 },
};

// Page-cache pages that no mapping uses, out of a large constant: fewer
// after the cases means a mapping's page was never given back.
static long
cache_unused(void)
{
  struct sysinfo si;

  if (sysinfo(&si) < 0)
    return -1;
  return (1L << 30) - (long)(si.cachepages - si.cacheidle);
}

static long
count_open_slots(void)
{
  struct sysinfo si;

  if (sysinfo(&si) < 0)
    return -1;
  return (1L << 20) - si.files;
}

static const struct leak leaks[] = {
  { "memleak", "pages", count_free_pages },
  { "fileleak", "open-file slots", count_open_slots },
  { "cacheleak", "cache pages unused by mappings (of 2^30)", cache_unused },
  { 0 },
};

// After exec from the exec_exit case: the new image must have no
// mappings and no faults.
static int
exec_probe(void)
{
  struct sysinfo si;

  if (sysinfo(&si) < 0 || si.resident != 0 || si.faults != 0) {
    printf("mmaptests: after exec %lu pages resident, %lu faults\n", si.resident, si.faults);
    return 1;
  }
  return 0;
}

int
main(int argc, char *argv[])
{
  struct suite suite = { "mmaptests", tests, leaks };

  if (argc == 2 && strcmp(argv[1], "--exec-probe") == 0)
    exit(exec_probe());
  harness_main(&suite, "mmaptests starting", argc, argv);
}
