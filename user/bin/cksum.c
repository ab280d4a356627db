// cksum: print the CRC-32 and size of files, and how fast they were read.
//
//   cksum [-n] FILE...
//
// For each file prints "CRC SIZE NAME" on stdout, CRC being the CRC-32 of
// zlib and Python's zlib.crc32 (8 hex digits), then on stderr the read
// throughput: the time spent inside read() only, and the time including the
// checksum. -n skips the checksum (CRC prints as 00000000) to time reading
// alone. Reads use a 1 MiB page-aligned buffer, so the kernel can DMA
// whole blocks straight into it (fs.c readi).
//
// The CRC uses "slicing by 8": eight 256-entry tables let one step consume
// 8 bytes with eight table lookups, about 4x fewer instructions than the
// byte-at-a-time loop, which matters under QEMU where instructions are
// what costs (docs/PERF_NOTES.md, fact 2, "instructions count, bytes do
// not").

#include "kernel/include/types.h"
#include "kernel/include/stat.h"
#include "kernel/include/fcntl.h"
#include "user/lib/user.h"

#define BUFSIZE (1 << 20)
#define CRCPOLY 0xEDB88320u // CRC-32 (IEEE 802.3), bit-reflected

static uint32 crctab[8][256];

// Fills crctab: the CRC-32 table for one byte, and for eight at a time.
static void
crc_init(void)
{
  uint32 c;
  int i, k;

  for (i = 0; i < 256; i++) {
    c = i;
    for (k = 0; k < 8; k++)
      c = (c & 1) ? (c >> 1) ^ CRCPOLY : c >> 1;
    crctab[0][i] = c;
  }
  // crctab[k][i]: the CRC of byte i followed by k zero bytes.
  for (k = 1; k < 8; k++)
    for (i = 0; i < 256; i++)
      crctab[k][i] = (crctab[k - 1][i] >> 8) ^ crctab[0][crctab[k - 1][i] & 0xff];
}

// Continues CRC state crc (pre- and post-inverted by the caller) over p[0..n).
static uint32
crc_update(uint32 crc, const uchar *p, uint64 n)
{
  uint32 lo, hi;

  for (; n >= 8; n -= 8, p += 8) {
    // Little-endian loads: the first byte is the lowest.
    lo = crc ^ (p[0] | p[1] << 8 | p[2] << 16 | (uint32)p[3] << 24);
    hi = p[4] | p[5] << 8 | p[6] << 16 | (uint32)p[7] << 24;
    crc = crctab[7][lo & 0xff] ^ crctab[6][(lo >> 8) & 0xff] ^ crctab[5][(lo >> 16) & 0xff] ^
        crctab[4][lo >> 24] ^ crctab[3][hi & 0xff] ^ crctab[2][(hi >> 8) & 0xff] ^
        crctab[1][(hi >> 16) & 0xff] ^ crctab[0][hi >> 24];
  }
  for (; n > 0; n--, p++)
    crc = crctab[0][(crc ^ *p) & 0xff] ^ (crc >> 8);
  return crc;
}

// Prints bytes per microsecond (= MB/s) with one decimal.
static void
print_rate(const char *what, uint64 bytes, uint64 us)
{
  uint64 tenths = us ? bytes * 10 / us : 0;

  fprintf(2, " %s %lu us (%lu.%lu MB/s)", what, us, tenths / 10, tenths % 10);
}

// Checksums one file. Returns 0, or 1 after printing why it failed.
static int
cksum(const char *path, uchar *buf, int docrc)
{
  uint64 size = 0, tread = 0, t0, t1, start;
  uint32 crc = 0xffffffffu;
  int fd, n;

  if ((fd = open(path, O_RDONLY)) < 0) {
    fprintf(2, "cksum: cannot open %s: %s\n", path, strerror(fd));
    return 1;
  }
  start = time_us();
  for (;;) {
    t0 = time_us();
    n = read(fd, buf, BUFSIZE);
    t1 = time_us();
    tread += t1 - t0;
    if (n <= 0)
      break;
    if (docrc)
      crc = crc_update(crc, buf, n);
    size += n;
  }
  close(fd);
  if (n < 0) {
    fprintf(2, "cksum: read %s: %s\n", path, strerror(n));
    return 1;
  }
  printf("%08x %lu %s\n", docrc ? crc ^ 0xffffffffu : 0, size, path);
  fprintf(2, "cksum: %s: %lu bytes; read", path, size);
  print_rate("", size, tread);
  print_rate("total", size, time_us() - start);
  fprintf(2, "\n");
  return 0;
}

// cksum [-n] FILE...: one line per file (see above); exit status 1 if a
// file could not be read, 2 for bad arguments.
int
main(int argc, char **argv)
{
  uchar *raw, *buf;
  int i = 1, docrc = 1, bad = 0;

  if (argc > 1 && strcmp(argv[1], "-n") == 0) {
    docrc = 0;
    i++;
  }
  if (i < argc && argv[i][0] == '-' && argv[i][1] != 0)
    fprintf(2, "cksum: unknown option %s\n", argv[i]);
  if (i >= argc || (argv[i][0] == '-' && argv[i][1] != 0)) {
    fprintf(2, "usage: cksum [-n] FILE...\n");
    return 2;
  }
  // Page-aligned, so that each 4 KiB block lands in one page.
  if ((raw = malloc(BUFSIZE + 4096)) == 0) {
    fprintf(2, "cksum: out of memory for a %d-byte buffer\n", BUFSIZE);
    return 1;
  }
  buf = (uchar *)(((uint64)raw + 4095) & ~(uint64)4095);
  crc_init();
  for (; i < argc; i++)
    bad |= cksum(argv[i], buf, docrc);
  return bad;
}
